#!/usr/bin/env python3
"""Plots of bench/peers/run.py's table: time / one-read floor per shape and peer (log scale), one
figure per scenario (plain, top-k 50, top-p 0.9) and dtype, written as peers-<scenario>-<dtype>.png.
run.py draws them after its run; this program redraws them from a table it wrote (matplotlib only,
no GPU):
    python3 bench/peers/plot.py [docs/benchmarks/peers.md]
"""
import os
import re
import sys


def plot(out, gpu, date, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for sc in ["plain", "top-k 50", "top-p 0.9"]:
        for dt in sorted({r["dtype"] for r in results}):
            sel = [r for r in results if r["scenario"] == sc and r["dtype"] == dt]
            if not sel:
                continue
            shapes = sorted({(r["V"], r["rows"]) for r in sel})
            peers = sorted({r["peer"] for r in sel}, key=lambda p: (p != "dds", p))
            fig, ax = plt.subplots(figsize=(14, 5))
            w = 0.8 / max(1, len(peers))
            for j, p in enumerate(peers):
                ys = []
                for s in shapes:
                    m = [r for r in sel if (r["V"], r["rows"]) == s and r["peer"] == p]
                    ys.append(m[0]["us"] / m[0]["floor"] if m else float("nan"))
                ax.bar([i + j * w for i in range(len(shapes))], ys, w, label=p)
            ax.axhline(1.0, color="k", lw=1, ls="--", label="one-read floor")
            ax.set_yscale("log")
            ax.set_xticks([i + 0.4 - w / 2 for i in range(len(shapes))])
            ax.set_xticklabels([f"{v}\nx{r}" for v, r in shapes], fontsize=8)
            ax.set_ylabel("time / one-read floor (log)")
            ax.set_title(f"{sc}, {dt} — {gpu}, {date}")
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            fig.tight_layout()
            fig.savefig(os.path.join(out, f"peers-{sc.replace(' ', '').replace('.', '')}-{dt}.png"),
                        dpi=90)
            plt.close(fig)


def read_table(path):
    """The GPU name, the date and the result rows of a peers.md table."""
    gpu, date, results = "", "", []
    with open(path) as f:
        for line in f:
            m = re.match(r"# dds vs peers — (.*), (\d{4}-\d{2}-\d{2})$", line.strip())
            if m:
                gpu, date = m.group(1), m.group(2)
                continue
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            if len(c) != 10 or not c[1].isdigit():
                continue
            results.append(dict(dtype=c[0], V=int(c[1]), rows=int(c[2]), scenario=c[4], peer=c[5],
                                us=float(c[6]), floor=float(c[7])))
    return gpu, date, results


if __name__ == "__main__":
    table = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "benchmarks", "peers.md")
    gpu, date, results = read_table(table)
    if not results:
        sys.exit(f"{table}: no result rows")
    plot(os.path.dirname(os.path.abspath(table)), gpu, date, results)
