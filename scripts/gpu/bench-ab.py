#!/usr/bin/env python3
"""Merges dds_bench outputs of two builds (scripts/gpu/ab.sh) into one markdown A/B table.

Usage: bench-ab.py [--tolerance 0.03] --old RUN.txt [RUN.txt ...] --new RUN.txt [RUN.txt ...]

A row of dds_bench is "scenario dtype V rows MB floor_us dds_us ratio [note]"; rows are matched
by (scenario, dtype, V, rows). Per row: the median dds time of each side over its runs, NEW / OLD,
"SLOWER" where NEW is more than the tolerance slower, and "every run" where, besides, every NEW
run of the row is slower than every OLD run (with one run a side this is the same as SLOWER):
a row whose runs overlap is within the spread of the runs, which for 8-row problems on an H200
reaches 6% between two runs of one library. Exit status 1 if any row is SLOWER, or if a row is
missing on one side."""
import argparse
import math
import re
import statistics
import sys

ROW = re.compile(r"^(.*?)\s+(f32|bf16|f16)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*(.*)$")


def read(paths):
    rows, order, head = {}, [], ""
    for p in paths:
        for line in open(p, errors="replace"):
            if line.startswith("dds_bench on"):
                head = line.strip()
            m = ROW.match(line.rstrip("\n"))
            if not m:
                continue
            key = (m.group(1).strip(), m.group(2), int(m.group(3)), int(m.group(4)))
            if key not in rows:
                rows[key] = []
                order.append(key)
            rows[key].append(float(m.group(7)))
    return rows, order, head


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--old", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    a = ap.parse_args()
    old, order, head_old = read(a.old)
    new, order_new, head_new = read(a.new)
    order += [k for k in order_new if k not in old]
    runs_old = max((len(v) for v in old.values()), default=0)
    runs_new = max((len(v) for v in new.values()), default=0)
    print(f"OLD: {head_old} ({runs_old} runs)  \nNEW: {head_new} ({runs_new} runs)\n")
    print("| scenario | dtype | V | rows | OLD us | NEW us | NEW / OLD | | |")
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    slower, apart, missing, logs = 0, 0, 0, []
    for k in order:
        if k not in old or k not in new:
            missing += 1
            print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {'-' if k not in old else statistics.median(old[k])} "
                  f"| {'-' if k not in new else statistics.median(new[k])} | | MISSING | |")
            continue
        o, n = statistics.median(old[k]), statistics.median(new[k])
        r = n / o if o > 0 else float("inf")
        logs.append(math.log(r))
        mark = "SLOWER" if r > 1 + a.tolerance else ""
        every = "every run" if mark and min(new[k]) > max(old[k]) else ""
        slower += bool(mark)
        apart += bool(every)
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {o:.1f} | {n:.1f} | {r:.3f} | {mark} | {every} |")
    gm = math.exp(sum(logs) / len(logs)) if logs else float("nan")
    print(f"\n{len(logs)} rows compared, geometric mean NEW / OLD {gm:.4f}, "
          f"{slower} more than {100 * a.tolerance:g}% slower ({apart} of them in every run), "
          f"{missing} missing on one side")
    return 1 if slower or missing else 0


if __name__ == "__main__":
    sys.exit(main())
