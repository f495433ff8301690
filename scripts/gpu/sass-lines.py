#!/usr/bin/env python3
"""Join ncu's per-SASS-instruction counters (the *_sass.csv.gz of scripts/gpu/profile.sh with
SOURCE=1) with the line info of `nvdisasm -g -gi` over the same cubin: executed warp
instructions and stall samples per source line (innermost line of this repo, and the line of the
kernel's own body it is inlined into). Usage: sass-lines.py ALL.sass MANGLED_KERNEL CSV[.gz] [N]
  ALL.sass: nvdisasm -g -gi over the kernel's cubin (cuobjdump -xelf all libdds.so.0 extracts
  the cubins; the build compiles with -lineinfo)"""
import csv, gzip, re, sys
from collections import defaultdict
sass, fn, path = sys.argv[1], sys.argv[2], sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 30
lines = {}   # offset -> (innermost repo line, outermost line)
cur = []; inside = False
pat = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
off = re.compile(r'/\*([0-9a-f]{4,})\*/\s+\S')
for ln in open(sass, errors='replace'):
    if ln.startswith('\t.section'):
        if inside: break
        inside = ('.text.' + fn + ',') in ln
        continue
    if not inside: continue
    m = pat.search(ln)
    if m:
        if not cur or cur[-1][1] is not None and m.group(3) is None and False: pass
        cur.append((m.group(1).split('/')[-1] + ':' + m.group(2)))
        if m.group(3) is None: chain, cur = cur, []; lines['_chain'] = chain
        continue
    m = off.search(ln)
    if m:
        chain = lines.get('_chain', ['?'])
        inner = next((c for c in chain if not c.startswith(('sm_', 'cuda', 'math', 'device_'))), chain[0])
        lines[int(m.group(1), 16)] = (inner, chain[-1])
op = gzip.open if path.endswith('.gz') else open
rows = list(csv.reader(op(path, 'rt', newline='', errors='replace')))
hi = next(i for i, r in enumerate(rows) if 'Instructions Executed' in r)
hdr = rows[hi]; data = [r for r in rows[hi + 1:] if r and r[0].startswith('0x')]
ie = hdr.index('Instructions Executed'); ws = hdr.index('Warp Stall Sampling (All Samples)')
base = int(data[0][0], 16)
agg = [defaultdict(lambda: [0.0, 0.0]) for _ in range(2)]
tot = [0.0, 0.0]
for r in data:
    o = int(r[0], 16) - base
    k = lines.get(o, ('?', '?'))
    v = (float(r[ie].replace(',', '') or 0), float(r[ws].replace(',', '') or 0))
    for j in range(2):
        agg[j][k[j]][0] += v[0]; agg[j][k[j]][1] += v[1]
    tot[0] += v[0]; tot[1] += v[1]
print(f"{fn}: {tot[0]:.4g} warp instructions executed, {tot[1]:.4g} stall samples")
for j, lab in ((0, 'innermost line'), (1, 'kernel-body line')):
    for s, sl in ((0, 'instructions'), (1, 'stall samples')):
        print(f"--- top {n} {lab} by {sl}  (instr%  stall%)")
        for k, v in sorted(agg[j].items(), key=lambda kv: -kv[1][s])[:n]:
            print(f"  {100*v[0]/max(tot[0],1):5.1f}  {100*v[1]/max(tot[1],1):5.1f}  {k}")
