#!/usr/bin/env python3
"""Side-by-side benchmark of dds against its peers on one GPU, in one run.

Peers: PyTorch eager (float32 and float64 Gumbel noise), torch.compile of the same step, a Triton
one-pass kernel (no filters), vLLM's model-runner-v2 Gumbel sampler and Qrita top-k/top-p
(loaded from .vllm/), FlashInfer's sampling kernels (loaded from .fi/); scripts/prep-peers.sh
makes both folders from pinned PyPI releases. Each is timed with CUDA events
(warm-up, median of >= 20 single-call timings, rotating input buffers so L2 does not flatter
anyone) on the shapes of bench/ and checked statistically (a fast wrong peer is not a peer).

Writes docs/benchmarks/peers.md (table) and docs/benchmarks/*.png (plots), stamped with the date
and GPU name. Usage (on the GPU machine, with libdds built with CUDA):
    DDS_LIB=build-gpu/libdds.so python3 bench/peers/run.py [--quick] [--budget SECONDS]
        [--rows 8,256] [--vocab 32000,262144]   (a part of the grid)
"""
import argparse
import datetime
import math
import os
import signal
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dds_ctypes  # noqa: E402
import flashinfer_peers  # noqa: E402
from plot import plot  # noqa: E402
import torch_peers  # noqa: E402
import triton_peers  # noqa: E402
import vllm_peers  # noqa: E402

SCENARIOS = ["plain", "guided", "top-k 50", "top-p 0.9", "probs bf16"]
# torch.compile recompiles per shape and scenario: only these shapes/scenarios, to fit the
# device-time budget (compilation is not part of the timing).
COMPILE_SHAPES = {(32000, 256), (262144, 4096)}
COMPILE_SCENARIOS = {"plain", "top-k 50"}
# PyTorch eager/compiled peers run at every shape: at 4096 x 262144 float32 (4.3 GB) a call takes
# ~0.05-0.2 s and its temporaries (sort values + int64 indices for top-p, float64 noise) stay
# under ~60 GB, which the H200 holds. Only a peer that starts after the time budget is spent is
# skipped (dds and the floors are always timed), and an out-of-memory error skips that peer only.
TORCH_MAX_BYTES = float(os.environ.get("PEERS_TORCH_MAX_BYTES", "1e11"))
# One compiled graph per (shape, dtype, scenario): 8 in all, dynamo's default recompile limit, after
# which it would silently fall back to eager. Raise the limit so torch.compile stays compiled.
try:
    import torch._dynamo  # noqa: E402

    for _k in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, _k):
            setattr(torch._dynamo.config, _k, max(64, getattr(torch._dynamo.config, _k)))
except Exception as _e:  # torch.compile then recompiles up to its default limit
    print("dynamo config:", _e)
STATE = {"seed": 0}  # varied by the statistical check so that every call draws new noise
REPS = 20
WARMUP = 3


class _Stopped(Exception):
    pass


def _stop(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the run at once
    raise _Stopped()


def chi2_crit(dof, z=4.75):
    t = 1.0 - 2.0 / (9.0 * dof) + z * math.sqrt(2.0 / (9.0 * dof))
    return dof * t ** 3


def chi2_check(tokens, probs, min_expected=20.0):
    """Chi-square of sampled tokens against the exact distribution, bins merged to >= 20."""
    n = tokens.numel()
    counts = torch.bincount(tokens.long().cpu(), minlength=probs.numel()).double()
    p = probs.double().cpu()
    if (counts[p == 0] > 0).any():
        return False, float("inf"), 0
    order = torch.argsort(p, descending=True)
    chi2, dof, acc_c, acc_e = 0.0, -1, 0.0, 0.0
    for i in order.tolist():
        acc_c += counts[i].item()
        acc_e += p[i].item() * n
        if acc_e >= min_expected:
            chi2 += (acc_c - acc_e) ** 2 / acc_e
            dof += 1
            acc_c, acc_e = 0.0, 0.0
    if acc_e > 0:
        chi2 += (acc_c - acc_e) ** 2 / max(acc_e, 1e-12)
        dof += 1
    dof = max(dof, 1)
    return chi2 < chi2_crit(dof), chi2, dof


class Dds:
    name = "dds"

    def __init__(self, lib, V, rows):
        self.s = dds_ctypes.Sampler(lib, V, max(rows, 1), max(rows, 1))
        self.rows = rows
        dev = "cuda"
        self.out = {k: torch.empty(rows, dtype=torch.float32, device=dev)
                    for k in ("logprobs", "confidence", "margin", "entropy")}
        self.out["tokens"] = torch.empty(rows, dtype=torch.int32, device=dev)
        self.positions = torch.arange(rows, dtype=torch.int32, device=dev)
        self.offsets = torch.tensor([0, rows], dtype=torch.int32, device=dev)
        self.probs = None

    def prepare(self, scenario, V, dtype):
        a = self.s.args()
        a.num_rows, a.num_requests = self.rows, 1
        a.row_offsets, a.positions = self.offsets.data_ptr(), self.positions.data_ptr()
        a.dtype = dds_ctypes.DTYPE[str(dtype).split(".")[-1]]
        a.seed = 1234
        for k in ("tokens", "logprobs", "confidence", "margin", "entropy"):
            setattr(a, k, self.out[k].data_ptr())
        if scenario == "guided":
            a.guidance_scale = 1.5
            a.uncond_num_rows = self.rows
        elif scenario == "top-k 50":
            a.top_k = 50
        elif scenario == "top-p 0.9":
            a.top_p = 0.9
        elif scenario == "probs bf16":
            self.probs = torch.empty(self.rows, V, dtype=torch.bfloat16, device="cuda")
            a.probs, a.probs_dtype, a.probs_row_stride = self.probs.data_ptr(), 1, V
        self.a = a

    def __call__(self, x, u, scenario):
        self.a.logits = x.data_ptr()
        if u is not None:
            self.a.uncond_logits = u.data_ptr()
        self.s.sample(self.a, torch.cuda.current_stream().cuda_stream)
        return self.out["tokens"]

    def close(self):
        self.s.close()


def scenario_kwargs(scenario):
    return {"guided": dict(guidance=1.5), "top-k 50": dict(top_k=50),
            "top-p 0.9": dict(top_p=0.9), "probs bf16": dict(probs_bf16=True)}.get(scenario, {})


def build_peers(lib, V, rows, reasons):
    """name -> (callable(x, u, scenario) -> tokens, supported scenarios)."""
    peers = {}
    d = Dds(lib, V, rows)
    peers["dds"] = (d, set(SCENARIOS))
    gen = torch.Generator(device="cuda").manual_seed(0)

    def eager(noise64):
        def f(x, u, sc):
            return torch_peers.step(x, u, noise64=noise64, generator=gen,
                                    **scenario_kwargs(sc))["tokens"]
        return f

    peers["torch eager fp32-noise"] = (eager(False), set(SCENARIOS))
    peers["torch eager fp64-noise"] = (eager(True), set(SCENARIOS))
    compiled = torch.compile(torch_peers.step, dynamic=False)

    def comp(x, u, sc):
        return compiled(x, u, **scenario_kwargs(sc))["tokens"]

    if (V, rows) in COMPILE_SHAPES:
        peers["torch.compile"] = (comp, set(COMPILE_SCENARIOS))

    def tri(x, u, sc):
        return triton_peers.onepass_sample(x, seed=7 + STATE["seed"])["tokens"]

    peers["triton one-pass"] = (tri, {"plain"})
    g, why = vllm_peers.load_gumbel()
    if g is not None:
        idx = torch.arange(rows, dtype=torch.int32, device="cuda")
        temp = torch.ones(rows, dtype=torch.float32, device="cuda")
        seeds = torch.arange(rows, dtype=torch.int64, device="cuda")
        pos = torch.zeros(rows, dtype=torch.int64, device="cuda")
        cur = [0]

        def vg(x, u, sc, fp64=False):
            if cur[0] != STATE["seed"]:
                cur[0] = STATE["seed"]
                seeds.copy_(torch.arange(rows, device="cuda") + rows * cur[0])
            return g(x, idx, temp, seeds, pos, use_fp64=fp64)

        peers["vLLM gumbel (fp32)"] = (vg, {"plain"})
        peers["vLLM gumbel (fp64)"] = (lambda x, u, sc: vg(x, u, sc, True), {"plain"})
    else:
        reasons["vLLM gumbel"] = why
    q, why = vllm_peers.load_qrita()
    if q is not None:
        kk = torch.full((rows,), 50, dtype=torch.int32, device="cuda")
        pp = torch.full((rows,), 0.9, dtype=torch.float32, device="cuda")

        def qr(x, u, sc):
            # Qrita masks float32 logits in place: a float32 input is copied first so that the
            # shared input buffers stay intact (a bf16 input is converted, as vLLM would).
            y = x.clone() if x.dtype == torch.float32 else x.float()
            y = q(y, kk if sc == "top-k 50" else None, pp if sc == "top-p 0.9" else None)
            # Then vLLM's random_sample: probs / Exp(1) noise, argmax (exponential race).
            probs = y.softmax(dim=-1, dtype=torch.float32)
            return probs.div_(torch.empty_like(probs).exponential_()).argmax(dim=-1)

        peers["vLLM Qrita + random_sample"] = (qr, {"top-k 50", "top-p 0.9"})
    else:
        reasons["vLLM Qrita"] = why
    fs, why = flashinfer_peers.load()
    if fs is not None:
        # An integer k takes FlashInfer's radix top-k fast path (V >= 65536), which needs its
        # top-k module; without that module k is given per row (the general path), and said so.
        fi_k = 50
        if not flashinfer_peers.STATE["topk"]:
            fi_k = torch.full((rows,), 50, dtype=torch.int32, device="cuda")
            reasons["FlashInfer top-k"] = ("top-k module not in .fi/: k passed per row (no radix "
                                           "top-k fast path)")
        def fi(x, u, sc):
            # FlashInfer's sampling kernels take float32 logits/probs (top_k_mask_logits also bf16).
            y = x.float()
            if sc == "top-k 50":
                return fs.top_k_top_p_sampling_from_logits(y, fi_k, 1.0)
            if sc == "top-p 0.9":
                return fs.top_p_sampling_from_probs(fs.softmax(y), 0.9)
            if sc == "probs bf16":
                p = fs.softmax(y)
                FI_SINK["probs"] = p.to(torch.bfloat16)
                return fs.sampling_from_probs(p)
            return fs.sampling_from_logits(y)

        def fi_mask(x, u, sc):
            return fs.sampling_from_logits(fs.top_k_mask_logits(x, 50).float())

        peers["FlashInfer"] = (fi, {"plain", "top-k 50", "top-p 0.9", "probs bf16"})
        peers["FlashInfer top-k mask + sample"] = (fi_mask, {"top-k 50"})
    else:
        reasons["FlashInfer"] = why
    return peers, d


FI_SINK = {}  # keeps FlashInfer's bf16 probs alive like dds's output buffer


def time_fn(fn, bufs, ubufs, scenario, reps=REPS):
    for i in range(WARMUP):
        fn(bufs[i % len(bufs)], ubufs[i % len(ubufs)] if ubufs else None, scenario)
    torch.cuda.synchronize()
    ts = []
    for i in range(reps):
        x = bufs[i % len(bufs)]
        u = ubufs[i % len(ubufs)] if ubufs else None
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(x, u, scenario)
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0)
    return statistics.median(ts)


def stat_check(peers, dds_obj, V, dtype, reasons_bad):
    """Each peer samples 8 x 4096 draws of one fixed row; chi-square against the exact law."""
    rows = min(4096, dds_obj.rows)
    torch.manual_seed(1)
    row = (torch.randn(V, device="cuda") * 2.0).to(dtype)
    urow = (torch.randn(V, device="cuda") * 2.0).to(dtype)
    x = row[None].expand(rows, V).contiguous()
    u = urow[None].expand(rows, V).contiguous()
    result = {}
    for name, (fn, sup) in peers.items():
        for sc in sorted(sup):
            if sc == "probs bf16":
                continue
            kw = scenario_kwargs(sc)

            def law(strict):
                return torch_peers.exact_distribution(
                    row.float(), urow.float() if sc == "guided" else None, kw.get("guidance", 0.0),
                    1.0, kw.get("top_k", 0), kw.get("top_p", 1.0), 0.0, strict_top_k=strict)

            exact = law(name == "dds")
            # Top-k ties at the k-th value (common with bf16 logits): dds keeps exactly k (ties to
            # the lower id), the PyTorch peers keep every tied token; vLLM's and FlashInfer's
            # kernels are checked against either rule (both are a correct top-k).
            alt = (law(True) if sc == "top-k 50" and not name.startswith(("dds", "torch"))
                   else None)
            toks = []
            for it in range(8):
                STATE["seed"] = it + 1
                if name == "dds":
                    dds_obj.prepare(sc, V, dtype)
                    dds_obj.a.seed = 1000 + it
                    toks.append(dds_obj(x, u if sc == "guided" else None, sc).clone())
                else:
                    toks.append(fn(x, u if sc == "guided" else None, sc).clone())
            STATE["seed"] = 0
            drawn = torch.cat(toks)
            ok, chi2, dof = chi2_check(drawn, exact)
            if not ok and alt is not None:
                ok, chi2, dof = chi2_check(drawn, alt)
            result[(name, sc)] = ok
            if not ok:
                reasons_bad.append(f"{name} / {sc} / {dtype}: chi2 {chi2:.1f} on {dof} dof")
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a small grid (smoke test)")
    ap.add_argument("--budget", type=float, default=250.0,
                    help="seconds: past it only dds is timed, past 1.3x it no shape is")
    ap.add_argument("--rows", help="comma-separated row counts (default 8,256,4096)")
    ap.add_argument("--vocab", help="comma-separated V (default 1025,32000,151936,262144)")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "docs", "benchmarks"))
    args = ap.parse_args()
    lib = dds_ctypes.Lib(os.environ.get("DDS_LIB"))
    gpu = torch.cuda.get_device_name()
    date = datetime.date.today().isoformat()
    Vs = [1025, 32000, 151936, 262144]
    rows_list = [8, 256, 4096]
    dtypes = [torch.float32, torch.bfloat16]
    if args.quick:
        Vs, rows_list, dtypes = [1025, 32000], [8, 256], [torch.bfloat16]
    if args.rows:
        rows_list = [int(x) for x in args.rows.split(",")]
    if args.vocab:
        Vs = [int(x) for x in args.vocab.split(",")]
    t0 = time.time()
    results = []  # dict rows
    skipped = {}
    bad = []
    checks = {}
    # A step time limit (SIGTERM from `timeout`) still leaves a table of what was measured.
    signal.signal(signal.SIGTERM, _stop)
    try:
        for dtype in dtypes:
            for V in Vs:
                for rows in rows_list:
                    if time.time() - t0 > 1.3 * args.budget:  # past the budget only dds runs; here none
                        skipped[(str(dtype), V, rows)] = "time budget"
                        continue
                    nbytes = rows * V * (4 if dtype == torch.float32 else 2)
                    nbuf = max(2, min(8, math.ceil(256e6 / nbytes)))
                    bufs = [(torch.randn(rows, V, device="cuda") * 4.0).to(dtype) for _ in range(nbuf)]
                    ubufs = [(torch.randn(rows, V, device="cuda") * 4.0).to(dtype) for _ in range(nbuf)]
                    reasons = {}
                    peers, dobj = build_peers(lib, V, rows, reasons)
                    if V == 1025 and rows == rows_list[-1]:  # the grid's largest row count
                        checks.update({(k[0], k[1], str(dtype)): v
                                       for k, v in stat_check(peers, dobj, V, dtype, bad).items()})
                    # Floors.
                    fl = time_fn(lambda x, u, sc: triton_peers.read_floor(x), bufs, None, "plain")
                    fl2 = time_fn(lambda x, u, sc: (triton_peers.read_floor(x),
                                                    triton_peers.read_floor(u)), bufs, ubufs, "guided")
                    pbuf = torch.empty(rows, V, dtype=torch.bfloat16, device="cuda")
                    flp = time_fn(lambda x, u, sc: triton_peers.copy_floor(x, pbuf), bufs, None, "plain")
                    for sc in SCENARIOS:
                        floor = {"guided": fl2, "probs bf16": flp}.get(sc, fl)
                        dobj.prepare(sc, V, dtype)
                        for name, (fn, sup) in peers.items():
                            if sc not in sup:
                                continue
                            if name.startswith("torch") and nbytes > TORCH_MAX_BYTES:
                                reasons[f"{name} at {dtype} {rows}x{V}"] = (
                                    f"skipped: input over PEERS_TORCH_MAX_BYTES={TORCH_MAX_BYTES:.3g}")
                                continue
                            if name != "dds" and time.time() - t0 > args.budget:
                                reasons[f"peers other than dds at {dtype} {rows}x{V}"] = (
                                    "time budget (--budget)")
                                continue
                            try:
                                t = time_fn(fn, bufs, ubufs if sc == "guided" else None, sc)
                            except Exception as e:  # a peer failing on a shape is reported, not fatal
                                reasons[f"{name} {sc} at {dtype} {rows}x{V}"] = (
                                    f"{type(e).__name__}: {str(e)[:160]}")
                                torch.cuda.synchronize()
                                torch.cuda.empty_cache()
                                continue
                            results.append(dict(dtype=str(dtype).split(".")[-1], V=V, rows=rows,
                                                scenario=sc, peer=name, us=t, floor=floor,
                                                MB=nbytes / 1e6))
                        print(f"{str(dtype):>15} V={V:>6} rows={rows:>4} {sc:>10}: " + ", ".join(
                            f"{r['peer']} {r['us']:.0f}us" for r in results
                            if r["V"] == V and r["rows"] == rows and r["scenario"] == sc
                            and r["dtype"] == str(dtype).split(".")[-1]), flush=True)
                    for k, v in reasons.items():
                        skipped[k] = v
                    dobj.close()
                    del bufs, ubufs, pbuf, peers
                    FI_SINK.clear()
                    torch.cuda.empty_cache()
    except _Stopped:
        skipped["run"] = (f"stopped by SIGTERM after {time.time() - t0:.0f} s (step time limit): "
                          "the shapes after the last printed one were not measured")
    write_outputs(args.out, gpu, date, results, skipped, bad, checks)


def write_outputs(out, gpu, date, results, skipped, bad, checks):
    os.makedirs(out, exist_ok=True)
    lines = [f"# dds vs peers — {gpu}, {date}", "",
             "Command: `" + " ".join(["python3", "bench/peers/run.py"] + sys.argv[1:]) + "`", "",
             "Times are medians of 20 single-call CUDA-event timings with rotating input buffers "
             "(bench/peers/run.py). `floor` is a plain read of the same bytes (both tensors when "
             "guided; read + bf16 write for probs) in the same run; `x floor` = time / floor; "
             "`dds speed-up` = peer time / dds time. Every peer computes tokens; the PyTorch "
             "peers also log-probs, confidence, margin, entropy (and bf16 probs); the Triton "
             "one-pass kernel tokens, log-probs, confidence, entropy; vLLM's and FlashInfer's "
             "kernels tokens only (FlashInfer also the bf16 probs in `probs bf16`).", "",
             f"Versions: torch {torch.__version__}, Triton {triton_version()}, vLLM files from "
             f"vllm {vllm_peers.version()}, FlashInfer {flashinfer_peers.version()} "
             "(scripts/prep-peers.sh). What each third-party peer runs per scenario: "
             "vLLM gumbel = `gumbel_sample` (model-runner v2); vLLM Qrita + random_sample = "
             "`apply_top_k_top_p_triton` on a float32 copy, then softmax / Exp(1) noise / argmax "
             "as vLLM's sampler does; FlashInfer = `sampling_from_logits` (plain), "
             "`top_k_top_p_sampling_from_logits(k=50, p=1)` (top-k), `softmax` + "
             "`top_p_sampling_from_probs` (top-p), `softmax` + bf16 copy + `sampling_from_probs` "
             "(probs bf16), each on float32 logits (a bf16 input is converted first, since "
             "FlashInfer's samplers take float32); FlashInfer top-k mask + sample = "
             "`top_k_mask_logits` (on the input dtype) + `sampling_from_logits`.", ""]
    lines.append("| dtype | V | rows | MB | scenario | peer | us | floor us | x floor | dds speed-up |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    dds_t = {(r["dtype"], r["V"], r["rows"], r["scenario"]): r["us"] for r in results
             if r["peer"] == "dds"}
    for r in results:
        d = dds_t.get((r["dtype"], r["V"], r["rows"], r["scenario"]))
        sp = f"{r['us'] / d:.1f}x" if d and r["peer"] != "dds" else ""
        lines.append(f"| {r['dtype']} | {r['V']} | {r['rows']} | {r['MB']:.1f} | {r['scenario']} | "
                     f"{r['peer']} | {r['us']:.1f} | {r['floor']:.1f} | {r['us'] / r['floor']:.2f} | {sp} |")
    lines += ["", "## Statistical check (V = 1025, 8 calls x 4096 rows = 32768 draws of one row, "
              "chi-square at p ~ 1e-6)", ""]
    for (name, sc, dt), ok in sorted(checks.items()):
        lines.append(f"- {name} / {sc} / {dt}: {'ok' if ok else 'FAILED'}")
    for b in bad:
        lines.append(f"- failure detail: {b}")
    lines += ["", "## Skipped", ""]
    for k, v in skipped.items():
        lines.append(f"- {k}: {v}")
    with open(os.path.join(out, "peers.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        plot(out, gpu, date, results)
    except Exception as e:
        print("plotting failed:", e)
    print("\n".join(lines))


def triton_version():
    try:
        import triton
        return triton.__version__
    except Exception:
        return "n/a"


if __name__ == "__main__":
    main()
