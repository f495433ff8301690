"""Sorts the ThreadSanitizer reports of the racecheck emulation (tests/emu/racecheck.sh) into
shared-memory hazards (what compute-sanitizer racecheck reports on the GPU: a race whose location
is a static __shared__ array or the dynamic shared-memory buffer of the emulation) and races on
global memory (heap blocks: the kernels' partial records, handed from CTA to CTA through
__threadfence and an atomic counter, which ThreadSanitizer does not model; racecheck does not
check global memory either). Prints each shared-memory hazard once (the two accesses' kernel
lines), a count of the others, and exits 1 if there is a shared-memory hazard or a report of any
other kind. Usage: python3 tsan_digest.py <folder of tsan.* logs>"""
import glob
import os
import re
import sys

FRAME = re.compile(r"#\d+ (\S.*?) (/\S+:\d+)")


def accesses(rep):
    """The first kernel-side frame of each access (Write / Read / Previous ...)."""
    out = []
    for block in re.split(r"\n(?=  (?:Previous )?(?:[Ww]rite|[Rr]ead|[Aa]tomic))", rep)[1:]:
        head = block.splitlines()[0].strip()
        kind = re.sub(r" at 0x[0-9a-f]+| by thread T\d+| by main thread|:$", "", head)
        where = "?"
        for m in FRAME.finditer(block):
            fn, loc = m.groups()
            if "/tests/emu/cuda_emu" in loc or "/usr/include/" in loc:
                continue  # the emulation's own helpers (shuffle slots, barriers)
            where = f"{os.path.basename(loc)} in {fn[:90]}"
            break
        out.append(f"{kind} at {where}")
    return out


def main():
    shared, other, n_global = {}, {}, 0
    for f in sorted(glob.glob(os.path.join(sys.argv[1], "tsan.*"))):
        text = open(f, errors="replace").read()
        for rep in text.split("==================\n"):
            m = re.search(r"WARNING: ThreadSanitizer: ([^(\n]+)", rep)
            if not m:
                continue
            kind = m.group(1).strip()
            if kind == "data race" and "Location is heap block" in rep:
                n_global += 1
                continue
            loc = re.search(r"Location is (global '[^']*'|[^\n]*)", rep)
            key = (kind, loc.group(1) if loc else "location unknown", tuple(accesses(rep)))
            (shared if kind == "data race" else other)[key] = shared.get(key, 0) + 1
    for (kind, loc, acc), n in list(shared.items()) + list(other.items()):
        print(f"HAZARD: {kind} on {loc} ({n}x)")
        for a in acc:
            print(f"    {a}")
    print(f"racecheck emulation: {len(shared)} shared-memory hazard(s), {len(other)} other report(s),"
          f" {n_global} global-memory race report(s) not counted (see tsan_digest.py)")
    return 1 if shared or other else 0


if __name__ == "__main__":
    sys.exit(main())
