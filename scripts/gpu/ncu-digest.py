#!/usr/bin/env python3
"""Digest of an ncu source-page CSV (ncu -i rep --page source --csv --print-source cuda|sass):
the rows with the most executed instructions and the most warp-stall samples, as text (used by
scripts/gpu/profile.sh with SOURCE=1). Usage: ncu-digest.py CSV [N]"""
import csv, sys
path = sys.argv[1]; n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
rows = list(csv.reader(open(path, newline='', errors='replace')))
hdr_i = next((i for i, r in enumerate(rows) if any('Instructions Executed' in c for c in r)), None)
if hdr_i is None:
    print("no 'Instructions Executed' column; the file starts:")
    for r in rows[:6]: print(r[:10])
    sys.exit(0)
hdr = rows[hdr_i]; data = rows[hdr_i + 1:]
def col(name):
    for i, c in enumerate(hdr):
        if c.strip() == name: return i
    for i, c in enumerate(hdr):
        if name in c: return i
    return None
ie = col('Instructions Executed'); ws = col('Warp Stall Sampling (All Samples)')
src = col('Source'); addr = col('Address') if col('Address') is not None else col('#')
def num(r, i):
    try: return float(r[i].replace(',', ''))
    except Exception: return 0.0
tot_ie = sum(num(r, ie) for r in data); tot_ws = sum(num(r, ws) for r in data) if ws is not None else 0
print(f"columns: {hdr[:8]} ... total instructions executed {tot_ie:.4g}, stall samples {tot_ws:.4g}")
for key, label, tot in ((ie, 'instructions executed', tot_ie), (ws, 'stall samples', tot_ws)):
    if key is None: continue
    print(f"--- top {n} by {label}")
    for r in sorted(data, key=lambda r: -num(r, key))[:n]:
        print(f"{100*num(r,key)/max(tot,1):5.1f}%  {r[addr] if addr is not None else ''}  {r[src][:150] if src is not None else ''}")
