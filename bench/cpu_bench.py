#!/usr/bin/env python3
"""CPU backend benchmark beside the numpy multi-pass form of the same step.

Runs bench/cpu_bench.cpp's binary (dds_sample on the CPU backend: one request, T = 0.8, f32
logits = 3 * N(0, 1), token + logprob + argmax + confidence + margin + entropy; 1 and 2 threads by
default) and then times, on the same shapes, the numpy form: max, exp-sum, per-token float32
Gumbel, argmax. Prints ns per logits element (median call, and the fastest call).

    python3 bench/cpu_bench.py [--bin build/dds_cpu_bench] [--threads 1 2]
"""
import argparse
import os
import subprocess
import sys
import time

SHAPES = [(1600, 1025), (64, 32000), (16, 151936), (8, 262144), (8, 1025), (1, 1025)]


def numpy_step(np, logits, rng):
    x = logits / np.float32(0.8)
    m = x.max(axis=1, keepdims=True)
    s = np.exp(x - m).sum(axis=1)  # the normaliser a log-prob needs
    u = rng.random(x.shape, dtype=np.float32)
    with np.errstate(divide="ignore"):  # u = 0 gives an infinite Gumbel, as numpy users get
        g = -np.log(-np.log(u))
    return np.argmax(x + g, axis=1), s


def run_numpy():
    try:
        import numpy as np
    except ImportError:
        print("numpy not importable: numpy form skipped")
        return
    rng = np.random.default_rng(1234)
    for rows, vocab in SHAPES:
        logits = (3 * rng.standard_normal((rows, vocab))).astype(np.float32)
        times, total = [], 0.0
        numpy_step(np, logits, rng)  # warm-up
        while len(times) < 4 or (total < 0.5 and len(times) < 1000):
            t0 = time.perf_counter()
            numpy_step(np, logits, rng)
            dt = time.perf_counter() - t0
            times.append(dt)
            total += dt
        times.sort()
        n = rows * vocab
        print(f"numpy  rows {rows:5d}  V {vocab:6d}  threads 1  {times[len(times) // 2] * 1e3:9.3f} "
              f"ms/call  {times[len(times) // 2] * 1e9 / n:7.2f} ns/element  "
              f"(fastest {times[0] * 1e9 / n:7.2f})", flush=True)


def cpu_line():
    """The CPU's model and the lane path the CPU backend picks on it (src/cpu_vec.cpp chooses
    AVX-512 when the CPU has avx512f, else AVX2 + FMA, else scalar)."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    if "avx512f" in flags:
        isa = "AVX-512"
    elif "avx2" in flags and "fma" in flags:
        isa = "AVX2 + FMA"
    else:
        isa = "scalar"
    return f"cpu {model}, {os.cpu_count()} hardware threads, lanes {isa}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/dds_cpu_bench", help="the dds_cpu_bench binary")
    ap.add_argument("--threads", nargs="*", default=["1", "2"], help="thread counts for dds")
    args = ap.parse_args()
    # Other work on the machine moves every figure: the load average is printed beside them.
    print(cpu_line(), flush=True)
    print("load average %.1f %.1f %.1f" % os.getloadavg(), flush=True)
    rc = subprocess.call([args.bin] + list(args.threads))
    if rc != 0:
        sys.exit(rc)
    run_numpy()
    print("load average %.1f %.1f %.1f" % os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()
