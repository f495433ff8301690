#!/usr/bin/env python3
"""Writes the seed inputs of the dds fuzz targets: deterministic pseudo-random byte strings of a
few lengths (the targets read their choices through FuzzedDataProvider, which takes integers from
the end of the input and payload bytes from the front, so any bytes are a well-formed input).
Run from anywhere: python3 tests/fuzz/corpus/gen_seeds.py. The corpus folders also hold inputs
kept from longer runs (libFuzzer -merge=1) and regression inputs (regression-*)."""
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
for target, lengths in (("fuzz_create", (8, 24, 64, 128)),
                        ("fuzz_sample", (16, 64, 256, 1024, 4096)),
                        ("fuzz_stash", (16, 64, 256, 1024, 4096))):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    for i, n in enumerate(lengths):
        rng = random.Random(1000 * i + n)
        with open(os.path.join(d, "seed-%02d-%d" % (i, n)), "wb") as f:
            f.write(bytes(rng.randrange(256) for _ in range(n)))
