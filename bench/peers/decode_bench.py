#!/usr/bin/env python3
"""dds_reveal and dds_verify_drafts against the PyTorch form of the same step, timed in the same
run with CUDA events (median of 20 after warm-up).

Reveal: 64 requests x 256 positions and 8 requests x 4096 positions, TOP_N with n = 8 per
request, against argsort/topk + scatter.
Verification: 64 requests, n = 4 and 8 drafts, V = 32000 and 151936, f32 logits, temperature 1,
against softmax p and q, the ratio test with uniforms, cumprod for the first rejection, the
residual max(p - q, 0) and torch.multinomial; inputs rotate over 3 buffer sets. The two draw
different random numbers, so the table compares mean accepted counts (both should be near the
expectation) rather than tokens.
Prints markdown tables and writes them to docs/benchmarks/decode.md.
Usage: DDS_LIB=build-gpu/libdds.so python3 bench/peers/decode_bench.py
"""
import ctypes as C
import datetime
import os
import statistics
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dds_ctypes  # noqa: E402

P = C.c_void_p


class RevealArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("num_rows", C.c_int32), ("num_requests", C.c_int32),
                ("row_offsets", P), ("positions", P), ("scores", P), ("eligible", P),
                ("policies", P), ("policy", C.c_int32), ("counts", P), ("count", C.c_int32),
                ("steps_left", P), ("thresholds", P), ("threshold", C.c_float), ("factors", P),
                ("factor", C.c_float), ("position_temperatures", P),
                ("position_temperature", C.c_float), ("seeds", P), ("seed", C.c_uint64),
                ("steps", P), ("step", C.c_uint32), ("canvas", P), ("canvas_stride", C.c_int64),
                ("canvas_length", C.c_int32), ("tokens", P), ("mask_token", C.c_int32),
                ("eos_token", C.c_int32), ("reveal", P), ("num_revealed", P), ("finished", P),
                ("request_status", P)]


def timeit(fn, reps=20, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1000)
    return statistics.median(ts)


def torch_reveal(scores, eligible, R, L, n, canvas, tokens):
    s = scores.view(R, L).masked_fill(~eligible.view(R, L), float("-inf"))
    idx = torch.topk(s, n, dim=-1).indices
    reveal = torch.zeros(R, L, dtype=torch.bool, device=scores.device)
    reveal.scatter_(1, idx, True)
    reveal &= eligible.view(R, L)
    canvas.view(R, L)[reveal] = tokens.view(R, L)[reveal]
    return reveal


def torch_verify(tl, dl, drafts):
    """The PyTorch form of one verification step. tl [R, n+1, V], dl [R, n, V] f32 logits,
    drafts [R, n] int64. Returns (accepted [R], out tokens [R, n+1] padded with -1)."""
    R, n1, V = tl.shape
    n = n1 - 1
    p = torch.softmax(tl, dim=-1)
    q = torch.softmax(dl, dim=-1)
    pd = p[:, :n].gather(-1, drafts.unsqueeze(-1)).squeeze(-1)
    qd = q.gather(-1, drafts.unsqueeze(-1)).squeeze(-1)
    u = torch.rand(R, n, device=tl.device)
    ok = (u * qd < pd).to(torch.int32)
    acc = ok.cumprod(dim=-1).sum(dim=-1)  # accepted prefix length
    ar = torch.arange(R, device=tl.device)
    p_i = p[ar, acc]
    q_i = q[ar, acc.clamp(max=n - 1)]
    resid = (p_i - q_i).clamp_min(0)
    rejected = (acc < n).unsqueeze(-1)
    resid = torch.where(rejected & (resid.sum(-1, keepdim=True) > 0), resid, p_i)
    tok = torch.multinomial(resid, 1).squeeze(-1)
    pos = torch.arange(n + 1, device=tl.device).unsqueeze(0)
    out = torch.where(pos < acc.unsqueeze(-1), torch.nn.functional.pad(drafts, (0, 1)), -1)
    out.scatter_(1, acc.unsqueeze(-1).to(torch.int64), tok.unsqueeze(-1))
    return acc, out


def bench_verify(lib, R=64, sets=3):
    rows = []
    for V in (32000, 151936):
        for n in (4, 8):
            s = dds_ctypes.Sampler(lib, V, R * (n + 1), R)
            g = torch.Generator(device="cuda")
            g.manual_seed(V + n)
            bufs = []
            for _ in range(sets):
                tl = 2.0 * torch.randn(R, n + 1, V, device="cuda", generator=g)
                dl = tl[:, :n] + 1.0 * torch.randn(R, n, V, device="cuda", generator=g)
                drafts = torch.multinomial(torch.softmax(dl, -1).view(R * n, V), 1,
                                           generator=g).view(R, n)
                bufs.append((tl.contiguous(), dl.contiguous(), drafts,
                             drafts.to(torch.int32).contiguous()))
            acc = torch.empty(R, dtype=torch.int32, device="cuda")
            out = torch.empty(R, n + 1, dtype=torch.int32, device="cuda")
            lp = torch.empty(R, n + 1, dtype=torch.float32, device="cuda")
            stream = torch.cuda.current_stream().cuda_stream
            args = []
            # One seed per request (a scalar seed would give every request the same noise).
            seeds = [torch.arange(k * R + 1, k * R + R + 1, dtype=torch.int64, device="cuda")
                     for k in range(sets)]
            for (tl, dl, _, d32), sd in zip(bufs, seeds):
                a = s.verify_args()
                a.seeds = sd.data_ptr()
                a.num_requests, a.num_drafts = R, n
                a.target_logits, a.draft_logits = tl.data_ptr(), dl.data_ptr()
                a.draft_tokens = d32.data_ptr()
                a.temperature = 1.0
                a.accepted_counts, a.out_tokens, a.out_logprobs = (acc.data_ptr(), out.data_ptr(),
                                                                   lp.data_ptr())
                args.append(a)
            it = {"k": 0}

            def run_dds():
                k = it["k"] % sets
                it["k"] += 1
                s.verify(args[k], stream)

            def run_torch():
                k = it["k"] % sets
                it["k"] += 1
                tl, dl, d64, _ = bufs[k]
                torch_verify(tl, dl, d64)

            # Mean accepted drafts per request over the buffer sets, both implementations.
            acc_dds, acc_torch = [], []
            for k in range(sets):
                it["k"] = k
                run_dds()
                torch.cuda.synchronize()
                acc_dds.append(acc.float().mean().item())
                a_t, _ = torch_verify(bufs[k][0], bufs[k][1], bufs[k][2])
                acc_torch.append(a_t.float().mean().item())
            # The CUDA result against the CPU backend (the oracle) on the same inputs and seed.
            sc = dds_ctypes.Sampler(lib, V, R * (n + 1), R, backend=0)
            tl_h, dl_h = bufs[0][0].cpu().numpy(), bufs[0][1].cpu().numpy()
            d_h = bufs[0][3].cpu().numpy()
            acc_h = np.zeros(R, np.int32)
            out_h = np.zeros((R, n + 1), np.int32)
            ac = s.verify_args()
            ac.num_requests, ac.num_drafts = R, n
            ac.target_logits, ac.draft_logits = tl_h.ctypes.data, dl_h.ctypes.data
            ac.draft_tokens = d_h.ctypes.data
            seeds_h = seeds[0].cpu().numpy().astype(np.uint64)
            ac.temperature, ac.seeds = 1.0, seeds_h.ctypes.data
            ac.accepted_counts, ac.out_tokens = acc_h.ctypes.data, out_h.ctypes.data
            sc.verify(ac, 0)
            it["k"] = 0
            run_dds()  # buffer set 0, its seeds
            torch.cuda.synchronize()
            same = bool((acc.cpu().numpy() == acc_h).all() and (out.cpu().numpy() == out_h).all())
            print(f"verify V={V} n={n}: CUDA vs CPU backend on the same inputs: "
                  f"{'identical' if same else 'DIFFERENT'} (mean accepted CUDA "
                  f"{acc.float().mean().item():.3f}, CPU {acc_h.mean():.3f})", flush=True)
            sc.close()
            it["k"] = 0
            t_dds = timeit(run_dds)
            t_torch = timeit(run_torch)
            rows.append((R, n, V, t_dds, t_torch, statistics.mean(acc_dds),
                         statistics.mean(acc_torch)))
            s.close()
            del bufs, args
            torch.cuda.empty_cache()
    return rows


def main():
    lib = dds_ctypes.Lib(os.environ.get("DDS_LIB"))
    L_ = lib.lib
    L_.dds_reveal_args_init.argtypes = [P, C.c_size_t]
    L_.dds_reveal.argtypes = [P, P, P]
    rows_out = []
    for R, L in [(64, 256), (8, 4096)]:
        n = 8
        s = dds_ctypes.Sampler(lib, 64, R * L, R)
        torch.manual_seed(0)
        scores = torch.rand(R * L, device="cuda")
        elig = torch.rand(R * L, device="cuda") < 0.7
        elig_u8 = elig.to(torch.uint8)
        tokens = torch.randint(0, 64, (R * L,), dtype=torch.int32, device="cuda")
        canvas = torch.full((R * L,), 63, dtype=torch.int32, device="cuda")
        reveal = torch.empty(R * L, dtype=torch.uint8, device="cuda")
        offs = torch.arange(0, R * L + 1, L, dtype=torch.int32, device="cuda")
        a = RevealArgs()
        lib.check(L_.dds_reveal_args_init(C.byref(a), C.sizeof(a)), "init")
        a.num_rows, a.num_requests = R * L, R
        a.row_offsets, a.scores, a.eligible = offs.data_ptr(), scores.data_ptr(), elig_u8.data_ptr()
        a.count = n
        a.canvas, a.canvas_length, a.canvas_stride = canvas.data_ptr(), L, L
        a.tokens, a.reveal = tokens.data_ptr(), reveal.data_ptr()
        stream = torch.cuda.current_stream().cuda_stream

        def run_dds():
            lib.check(L_.dds_reveal(s.h, C.byref(a), P(stream)), "dds_reveal")

        run_dds()
        ref = torch_reveal(scores, elig, R, L, n, canvas.clone(), tokens)
        same = bool((reveal.view(R, L).bool() == ref).all().item())
        t_dds = timeit(run_dds)
        t_torch = timeit(lambda: torch_reveal(scores, elig, R, L, n, canvas, tokens))
        rows_out.append((R, L, n, t_dds, t_torch, same))
        s.close()
    gpu = torch.cuda.get_device_name()
    lines = [f"## dds_reveal vs PyTorch — {gpu}, {datetime.date.today().isoformat()}", "",
             "| requests x positions | n | dds us | PyTorch us | speed-up | same selection |",
             "|---|---|---|---|---|---|"]
    for R, L, n, td, tt, same in rows_out:
        lines.append(f"| {R} x {L} | {n} | {td:.1f} | {tt:.1f} | {tt / td:.1f}x | {same} |")
    vrows = bench_verify(lib)
    lines += ["", f"## dds_verify_drafts vs PyTorch — {gpu}, {datetime.date.today().isoformat()}",
              "",
              "f32 logits (2 N(0,1) targets, drafts = targets + N(0,1)), temperature 1, inputs "
              "rotating over 3 buffer sets; PyTorch: softmax p, q, ratio test, cumprod, residual, "
              "multinomial.", "",
              "| requests | n | V | dds us | PyTorch us | speed-up | mean accepted dds | "
              "mean accepted PyTorch |",
              "|---|---|---|---|---|---|---|---|"]
    for R, n, V, td, tt, ad, at in vrows:
        lines.append(f"| {R} | {n} | {V} | {td:.1f} | {tt:.1f} | {tt / td:.2f}x | {ad:.3f} | "
                     f"{at:.3f} |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    out = os.path.join(HERE, "..", "..", "docs", "benchmarks")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "decode.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
