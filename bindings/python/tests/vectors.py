"""Parser of the shared test vectors (tests/vectors/README.md): sample_vectors.txt and
stash_vectors.txt, one `case <name>` ... `end` block per case, one key per line."""

from __future__ import annotations

import os
from typing import Dict, List

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VECTOR_DIR = os.environ.get("DDS_VECTOR_DIR", os.path.join(ROOT, "tests", "vectors"))

# Keys whose values are floats (may be inf / -inf / nan); every other array key holds integers.
FLOAT_KEYS = {
    "temperatures", "guidance_scales", "top_ps", "min_ps", "logits", "uncond_logits",
    "expect_logprobs", "expect_confidence", "expect_margin", "expect_entropy",
}
# Keys with one scalar or a word.
WORD_KEYS = {"dtype", "stats"}
U64_KEYS = {"seeds"}


def _float(tok: str) -> float:
    return float(tok)  # float() reads inf, -inf, nan, %.9g


def parse(path: str) -> List[Dict[str, object]]:
    cases: List[Dict[str, object]] = []
    cur: Dict[str, object] = {}
    with open(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, _, rest = line.partition(" ")
            vals = rest.split()
            if key == "case":
                if cur:
                    raise ValueError(f"{path}:{lineno}: case inside case {cur.get('name')}")
                cur = {"name": rest.strip()}
            elif key == "end":
                if not cur:
                    raise ValueError(f"{path}:{lineno}: end outside a case")
                cases.append(cur)
                cur = {}
            else:
                if not cur:
                    raise ValueError(f"{path}:{lineno}: key {key} outside a case")
                if key in WORD_KEYS:
                    cur[key] = vals[0]
                elif key in FLOAT_KEYS:
                    cur[key] = np.array([_float(v) for v in vals], dtype=np.float64)
                elif key in U64_KEYS:
                    cur[key] = np.array([int(v, 0) for v in vals], dtype=np.uint64)
                else:
                    try:
                        nums: list = [int(v, 0) for v in vals]
                        dt: object = np.int64
                    except ValueError:
                        nums = [_float(v) for v in vals]
                        dt = np.float64
                    cur[key] = nums[0] if len(nums) == 1 and key in SCALAR_KEYS else np.array(
                        nums, dtype=dt)
    if cur:
        raise ValueError(f"{path}: unterminated case {cur.get('name')}")
    return cases


SCALAR_KEYS = {
    "vocab", "num_rows", "num_requests", "uncond_num_rows", "banned_token", "num_top",
    "logits_mode", "num_slots", "rows_per_slot", "poison_id", "poison_value", "poison_rank",
}


def load(name: str) -> List[Dict[str, object]]:
    path = os.path.join(VECTOR_DIR, name)
    if not os.path.exists(path):
        return []
    return parse(path)
