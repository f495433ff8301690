"""Turns a CUDA kernel header into host C++ for the emulations (tests/emu/run_sample.sh,
run_stash.sh): strips the CUDA includes, replaces the few device-only constructs, and (sample)
drops the host launchers. Usage: python3 emu_gen.py sample|stash <kernel header> <output>."""
import sys

# Every replacement keeps the line count, and the output starts with a #line directive, so that
# compiler messages and ThreadSanitizer reports (tests/emu/racecheck.sh) name the kernel header's
# own lines.
COMMON = [
    ("#include <cuda_fp16.h>\n", "\n"),
    ("#include <cuda_runtime.h>\n", "\n"),
    ('asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));', "y = exp2f(x);"),
]
PROFILES = {
    "sample": COMMON + [
        ("__half2float(__ushort_as_half(h))", "dds::f16_to_f32(h)"),
        ("extern __shared__ __align__(16) unsigned char smem_raw[];",
         "unsigned char* smem_raw = g_dynsmem;"),
        ("__shared__ __align__(16) float s_stage", "alignas(16) static float s_stage"),
        # filter_kernel's in-CTA candidate list (__activemask() ballots in divergent code, which
        # the emulation's EmuConv models): on, as on the GPU, unless emu_sample's ctalist=0.
        ("constexpr bool kFilterCtaList = true;",
         "inline bool kFilterCtaList = true; inline std::atomic<int> g_emu_ctalist_rows{0};"),
        # (rows that used the list: emu_sample prints the count)
        ("    cand = sm.ncand <= kCandCap;\n",
         "    cand = sm.ncand <= kCandCap; if (cand && tid == 0) ++g_emu_ctalist_rows;\n"),
    ],
    "stash": COMMON + [
        ("#include <cuda_bf16.h>\n", "\n"),
        ("extern __shared__ __align__(16) unsigned char smem[];",
         "unsigned char* smem = g_dynsmem;"),
        ("#if defined(__CUDACC__)\n", "#if 1\n"),  # the device part, compiled for the host
    ],
}


def main():
    profile, src, dst = sys.argv[1:4]
    s = open(src).read()
    if profile == "sample":
        # Keep the kernels and the host helpers the harness calls (plain_bpw and the default
        # dispatch rules, cand_cap_for, cand_lvl0_for); drop the launchers (<<<>>>).
        cut = s.index("// Host side")
        i0 = s.index("inline int plain_bpw(")
        i1 = s.index("// (end of the default dispatch rules)\n", i0)
        j0 = s.index("inline int cand_cap_for")
        j1 = s.index("}  // namespace ksample", j0)
        line = lambda i: f'#line {s.count(chr(10), 0, i) + 1} "{src}"\n'
        s = (s[:cut] + line(i0) + s[i0:i1] + line(j0) + s[j0:j1] +
             "}  // namespace ksample\n}  // namespace dds\n#endif\n")
    for a, b in PROFILES[profile]:
        if a not in s:
            sys.exit(f"emu_gen.py: pattern not found in {src}: {a!r}")
        assert a.count("\n") == b.count("\n"), a
        s = s.replace(a, b)
    open(dst, "w").write(f'#line 1 "{src}"\n' + s)


if __name__ == "__main__":
    main()
