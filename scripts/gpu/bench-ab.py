#!/usr/bin/env python3
"""Merges dds_bench outputs of two builds (scripts/gpu/ab.sh) into one markdown A/B table.

Usage: bench-ab.py [--tolerance 0.03] --old RUN.txt [RUN.txt ...] --new RUN.txt [RUN.txt ...]

A row of dds_bench is "scenario dtype V rows MB floor_us dds_us ratio [note]"; rows are matched
by (scenario, dtype, V, rows). Per row: the median dds time of each side over its runs, NEW / OLD,
"SLOWER" where NEW is more than the tolerance slower, and "every run" where, besides, every NEW
run of the row is slower than every OLD run (with one run a side this is the same as SLOWER):
a row whose runs overlap is within the spread of the runs, which for 8-row problems on an H200
reaches 6% between two runs of one library (on an H100, 12 runs of one side of an 8-row row
spread by 3-16% of their median, 7% typical).
With two or more runs a side, the shift between the sides with its 95% confidence interval
(Hodges-Lehmann: the median of the pairwise ratios NEW_j / OLD_i; the interval from their order
statistics at the rank-sum test's normal approximation) says whether a median ratio above the
tolerance stands out of that spread: "beyond the spread" where the whole interval lies above
1 + tolerance. Exit status 1 if any row is SLOWER, or if a row is missing on one side."""
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


def shift_ci(o, n, z=1.959964):
    """Hodges-Lehmann ratio NEW / OLD and its ~95% interval (None: fewer than two runs a side)."""
    if len(o) < 2 or len(n) < 2:
        return None
    d = sorted(math.log(y) - math.log(x) for x in o for y in n if x > 0 and y > 0)
    m, k = len(o), len(n)
    c = int(math.floor(m * k / 2 - z * math.sqrt(m * k * (m + k + 1) / 12.0)))
    c = max(c, 0)
    return tuple(math.exp(v) for v in (statistics.median(d), d[c], d[len(d) - 1 - c]))


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
    print("| scenario | dtype | V | rows | OLD us | NEW us | NEW / OLD | shift (95% CI) | | |")
    print("|---|---|---:|---:|---:|---:|---:|---|---|---|")
    slower, apart, beyond, missing, logs = 0, 0, 0, 0, []
    for k in order:
        if k not in old or k not in new:
            missing += 1
            print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {'-' if k not in old else statistics.median(old[k])} "
                  f"| {'-' if k not in new else statistics.median(new[k])} | | | MISSING | |")
            continue
        o, n = statistics.median(old[k]), statistics.median(new[k])
        r = n / o if o > 0 else float("inf")
        logs.append(math.log(r))
        mark = "SLOWER" if r > 1 + a.tolerance else ""
        ci = shift_ci(old[k], new[k])
        shift = f"{ci[0]:.3f} ({ci[1]:.3f}-{ci[2]:.3f})" if ci else ""
        every = "every run" if mark and min(new[k]) > max(old[k]) else ""
        if mark and ci and ci[1] > 1 + a.tolerance:
            every = (every + ", " if every else "") + "beyond the spread"
            beyond += 1
        slower += bool(mark)
        apart += bool(every.startswith("every run"))
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {o:.1f} | {n:.1f} | {r:.3f} | {shift} | {mark} | {every} |")
    gm = math.exp(sum(logs) / len(logs)) if logs else float("nan")
    print(f"\n{len(logs)} rows compared, geometric mean NEW / OLD {gm:.4f}, "
          f"{slower} more than {100 * a.tolerance:g}% slower ({apart} of them in every run, "
          f"{beyond} beyond the spread), {missing} missing on one side")
    return 1 if slower or missing else 0


if __name__ == "__main__":
    sys.exit(main())
