#!/usr/bin/env python3
"""Per-call host cost of dds.Sampler.sample from Python.

    python bench/python_call_cost.py [--backend cpu|cuda|auto] [--iters N] [--json FILE]

Each case calls `Sampler.sample` on one logits tensor, three outputs (tokens, confidence,
entropy): into preallocated `out_*` arrays ("into out") and allocating them ("allocating");
"decode" is "into out" with the keywords of a decode step (row_offsets of two requests, one seed
per request as an array, step as a Python int that changes every call, temperature 0.8, top_k
50); "full path" is "into out" with the sampler's plans turned off (every call takes the
Python layer's full path, as the first call with new shapes does). Beside them: the raw SWIG
call `dds._dds.dds_sample` with an args struct prepared once (the C floor of the same work), and
`torch.argmax` on the same tensor (what an eager decode loop pays for the simplest op).

cpu backend: numpy float32 and, when torch is importable, torch CPU tensors; 1 x 8 (the C work
is tiny, so the time is the Python layer's), 8 x 1025 and 8 x 32000. Times are the median of
`--repeats` runs of `--iters` calls, in microseconds per call, of the process's CPU time
(time.process_time: a loaded machine's waits are not counted).

cuda backend: torch CUDA tensors, bf16 and f32, 8 x 1025 and 8 x 32000, on the current stream.
"host" is the time to queue a call: loops of at most HOST_CHUNK calls, each followed by a
synchronisation that is not counted, so the device's launch queue never fills (a full queue would
make a call wait for the GPU and report the GPU's time as the host's). "wall" is a loop of --iters
calls with one synchronisation at the end: max(host, GPU time) per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import dds

OUTS = ("tokens", "confidence", "entropy")


HOST_CHUNK = 100  # calls queued between synchronisations when timing the host side


def _timeit(fn, iters, repeats, sync=None, clock=time.perf_counter):
    """(host us/call, wall us/call): medians over `repeats` loops of up to `iters` calls (fewer
    when one call is slow: a loop lasts about 0.2 s), timed with `clock`. With `sync` (a device
    backend), host time is summed over chunks of HOST_CHUNK calls, each followed by an uncounted
    synchronisation, and wall time is one loop with a synchronisation at its end."""
    for _ in range(3):
        fn()
    if sync:
        sync()
    t0 = clock()
    fn()
    if sync:
        sync()
    n = max(10, min(iters, int(0.2 / max(clock() - t0, 1e-7))))
    host, wall = [], []
    for _ in range(repeats):
        if sync:
            queued, done = 0.0, 0
            while done < n:
                k = min(HOST_CHUNK, n - done)
                t0 = clock()
                for _ in range(k):
                    fn()
                queued += clock() - t0
                sync()
                done += k
            host.append(queued / n * 1e6)
        t0 = clock()
        for _ in range(n):
            fn()
        t1 = clock()
        if sync:
            sync()
        t2 = clock()
        if not sync:
            host.append((t1 - t0) / n * 1e6)
        wall.append((t2 - t0) / n * 1e6)
    return statistics.median(host), statistics.median(wall)


def _outs(lib, rows, device=None):
    if lib == "numpy":
        return dict(out_tokens=np.empty(rows, np.int32), out_confidence=np.empty(rows, np.float32),
                    out_entropy=np.empty(rows, np.float32))
    import torch

    return dict(out_tokens=torch.empty(rows, dtype=torch.int32, device=device),
                out_confidence=torch.empty(rows, dtype=torch.float32, device=device),
                out_entropy=torch.empty(rows, dtype=torch.float32, device=device))


def _decode_kw(lib, rows, device=None):
    offs = np.array([0, rows // 2, rows] if rows > 1 else [0, 1], np.int32)
    seeds = np.arange(1, len(offs), dtype=np.uint64)
    if lib == "torch":
        import torch

        offs = torch.from_numpy(offs).to(device or "cpu")
        # device seeds may be int64 (same bits); host ones are used in place only as uint64
        seeds = torch.from_numpy(seeds.astype(np.int64) if device is not None else seeds)
        seeds = seeds.to(device or "cpu")
    return dict(row_offsets=offs, seed=seeds, temperature=0.8, top_k=50)


def _raw_call(s, logits, outs, stream):
    """The SWIG call alone, its args struct built once (the floor under the Python layer)."""
    a, _res, ctx = s._sample_args(None, logits, dict(outputs=(), **outs, stream=stream))
    h = s._live()
    c_stream = ctx.stream
    keep = ctx.keep  # noqa: F841 - alive while the closure is
    return lambda: dds._dds.dds_sample(h, a, c_stream)


def run_case(s, logits, lib, iters, repeats, device=None, sync=None, stream=None,
             clock=time.perf_counter):
    rows = logits.shape[0]
    outs = _outs(lib, rows, device)
    row = {}
    t = lambda fn: _timeit(fn, iters, repeats, sync, clock)  # noqa: E731
    row["into_out"] = t(lambda: s.sample(logits, **outs))
    row["allocating"] = t(lambda: s.sample(logits, outputs=OUTS))
    dkw = _decode_kw(lib, rows, device)
    steps = iter(range(1 << 62))
    row["decode"] = t(lambda: s.sample(logits, step=next(steps), **dkw, **outs))
    mod = sys.modules.get("dds._sampler")
    if hasattr(mod, "MAX_PLANS"):  # the internal hook: no plans kept while it is 0
        old, mod.MAX_PLANS = mod.MAX_PLANS, 0
        s._plans.clear()
        try:
            row["full_path"] = t(lambda: s.sample(logits, **outs))
        finally:
            mod.MAX_PLANS = old
    row["raw_swig"] = t(_raw_call(s, logits, outs, stream))
    if lib == "torch":
        import torch

        row["torch_argmax"] = t(lambda: torch.argmax(logits, dim=-1))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="auto", choices=("cpu", "cuda", "auto"))
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--shapes", help="rows x vocab list, e.g. 1x8,8x1025 (default: per backend)")
    ap.add_argument("--json", help="write the results to this file as JSON")
    args = ap.parse_args()

    try:
        import torch
    except ImportError:
        torch = None
    backend = args.backend
    if backend == "auto":
        backend = ("cuda" if dds.has_cuda() and torch is not None and torch.cuda.is_available()
                   else "cpu")
    results = {"dds": dds.__version__, "backend": backend, "python": sys.version.split()[0],
               "numpy": np.__version__, "torch": getattr(torch, "__version__", None),
               "iters": args.iters, "repeats": args.repeats, "cases": []}
    if backend == "cuda":
        if torch is None or not torch.cuda.is_available():
            print("python_call_cost: --backend cuda needs torch with a CUDA device", file=sys.stderr)
            return 2
        results["device"] = torch.cuda.get_device_name(0)
        shapes = [(8, 1025), (8, 32000)]
        dtypes = [("bf16", torch.bfloat16), ("f32", torch.float32)]
        libs = [("torch", None)]
    else:
        shapes = [(1, 8), (8, 1025), (8, 32000)]
        dtypes = [("f32", None)]
        libs = [("numpy", None)] + ([("torch", None)] if torch is not None else [])

    if args.shapes:
        shapes = [tuple(int(v) for v in sh.split("x")) for sh in args.shapes.split(",")]
    print(f"dds {dds.__version__}, backend {backend}, python {results['python']}, "
          f"numpy {np.__version__}, torch {results['torch']}"
          + (f", {results['device']}" if backend == "cuda" else ""))
    hdr = ("   host / wall us per call" if backend == "cuda" else "   us per call")
    cols = ("into_out", "allocating", "decode", "full_path", "raw_swig", "torch_argmax")
    print(f"{'lib':6} {'dtype':5} {'shape':>9} | " + " ".join(
        f"{c.replace('_', ' ').replace('torch ', 'torch.'):>15}" for c in cols) + hdr)
    rng = np.random.default_rng(0)
    for lib, _ in libs:
        for dname, tdt in dtypes:
            for rows, V in shapes:
                x = rng.standard_normal((rows, V)).astype(np.float32)
                if backend == "cuda":
                    dev = torch.device("cuda", 0)
                    logits = torch.from_numpy(x).to(dev, tdt)
                    s = dds.Sampler(vocab_size=V, backend="cuda", max_rows=rows)
                    row = run_case(s, logits, lib, args.iters, args.repeats, dev,
                                   torch.cuda.synchronize,
                                   torch.cuda.current_stream().cuda_stream)
                else:
                    logits = x if lib == "numpy" else torch.from_numpy(x)
                    s = dds.Sampler(vocab_size=V, max_rows=rows)
                    row = run_case(s, logits, lib, args.iters, args.repeats,
                                   clock=time.process_time)
                s.close()
                cells = []
                for k in cols:
                    v = row.get(k)
                    if v is None:
                        cells.append(f"{'-':>15}")
                    elif backend == "cuda":
                        cells.append(f"{v[0]:7.1f}/{v[1]:7.1f}")
                    else:
                        cells.append(f"{v[1]:15.1f}")
                print(f"{lib:6} {dname:5} {f'{rows}x{V}':>9} | " + " ".join(cells))
                results["cases"].append({"lib": lib, "dtype": dname, "rows": rows, "vocab": V,
                                         **{k: {"host_us": v[0], "wall_us": v[1]}
                                            for k, v in row.items()}})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
