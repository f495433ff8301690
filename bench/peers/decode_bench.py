#!/usr/bin/env python3
"""dds_reveal against the PyTorch form of the same step (top-n by score among eligible rows,
argsort/topk + scatter), timed in the same run with CUDA events (median of 20 after warm-up).

Shapes: 64 requests x 256 positions and 8 requests x 4096 positions, TOP_N with n = 8 per
request. Prints a markdown table and appends it to docs/benchmarks/decode.md.
Usage: DDS_LIB=build-gpu/libdds.so python3 bench/peers/decode_bench.py
"""
import ctypes as C
import datetime
import os
import statistics
import sys

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
    lines += ["", "dds_verify_drafts has no CUDA kernel yet (CPU only), so it is not timed here.", ""]
    text = "\n".join(lines)
    print(text)
    out = os.path.join(HERE, "..", "..", "docs", "benchmarks")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "decode.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
