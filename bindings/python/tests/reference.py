"""A NumPy reference of docs/sampling.md (independent of libdds), for small rows.

Used to check the binding end to end: the tokens libdds samples through the package must be the
ones the spec defines (Philox4x32-10 noise, two-level Gumbel-max, filters in order k, p, min-p).
Written for clarity, float64 where the spec says so, fp32 where it says fp32.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

SALT_BLOCK = 0x424C4B31
SALT_TOKEN = 0x544F4B31
BLOCK = 1024
FLT_MAX = np.float32(np.finfo(np.float32).max)
_MASK = np.uint64(0xFFFFFFFF)


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Vectorised Philox4x32-10 over uint64 arrays holding 32-bit values."""
    c = [np.asarray(v, dtype=np.uint64) & _MASK for v in (c0, c1, c2, c3)]
    k0 = np.uint64(k0) & _MASK
    k1 = np.uint64(k1) & _MASK
    m0, m1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    w0, w1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
    for r in range(10):
        if r > 0:
            k0 = (k0 + w0) & _MASK
            k1 = (k1 + w1) & _MASK
        p0 = m0 * c[0]
        p1 = m1 * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & _MASK
        hi1, lo1 = p1 >> np.uint64(32), p1 & _MASK
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return c


def gumbel(seed: int, step: int, pos: int, ids, salt: int) -> np.ndarray:
    ids = np.asarray(ids, dtype=np.uint64)
    n = ids.shape
    x = philox4x32_10(ids, np.full(n, pos, np.uint64), np.full(n, step, np.uint64),
                      np.full(n, salt, np.uint64), seed & 0xFFFFFFFF, seed >> 32)
    bits = x[0] | (x[1] << np.uint64(32))
    u = ((bits >> np.uint64(11)) | np.uint64(1)).astype(np.float64) * 2.0 ** -53
    e = -np.log1p(-u)
    return -np.log(e)


def _order(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Columns idx sorted by (x desc, t asc)."""
    return idx[np.lexsort((idx, -x[idx].astype(np.float64)))]


def sample_row(c: np.ndarray, *, u: Optional[np.ndarray] = None, guidance_scale: float = 0.0,
               temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
               seed: int = 0, step: int = 0, pos: int = 0, banned_token: int = -1, g=None):
    """Token, argmax and the processed distribution (dict t -> prob) of one row (floats in fp32).
    Keyword names follow dds.Sampler.sample."""
    g = guidance_scale if g is None else g
    T, k, p, banned = temperature, top_k, top_p, banned_token
    c = np.asarray(c, np.float32)
    V = c.shape[0]
    with np.errstate(invalid="ignore", over="ignore"):
        if u is not None and g != 0.0:
            u = np.asarray(u, np.float32)
            d = (c - u).astype(np.float32)
            l = (np.float64(np.float32(g)) * d.astype(np.float64) + c.astype(np.float64))
            l = l.astype(np.float32)  # fma then one rounding (exact for these sizes in f64)
            l[(c == -np.inf) | (u == -np.inf)] = -np.inf
        else:
            l = c.copy()
        if 0 <= banned < V:
            l[banned] = -np.inf
        l[np.isnan(l)] = -np.inf
        l[l == np.inf] = FLT_MAX
    k0 = np.nonzero(l > -np.inf)[0]
    if k0.size == 0:
        return 0, 0, {}
    amax = int(_order(l, k0)[0])
    T32 = np.float32(T)
    greedy = T32 == 0 or np.isinf(np.float32(1.0) / T32)
    if greedy:
        return amax, amax, {amax: 1.0}
    inv = np.float32(np.float32(1.0) / T32)
    with np.errstate(over="ignore"):
        a = (l * inv).astype(np.float32)
    a[a == np.inf] = FLT_MAX
    a[(a == -np.inf) & (l > -np.inf)] = -FLT_MAX
    m = float(a[k0].max())
    keep = k0
    n0 = k0.size
    if (k > 0 and k < n0) or p < 1.0:
        order = _order(a, k0)
        if k > 0 and k < n0:
            order = order[:k]
        if p < 1.0:
            e = np.exp(a[order].astype(np.float64) - m)
            target = float(np.float32(p)) * e.sum()
            before = np.concatenate([[0.0], np.cumsum(e)[:-1]])
            ok = before < target
            ok[0] = True
            order = order[ok]
        keep = np.sort(order)
    if min_p > 0.0:
        mp = min(float(np.float32(min_p)), 1.0)
        keep = keep[np.exp(a[keep].astype(np.float64) - m) >= mp]
    # two-level Gumbel-max
    mk = float(a[keep].max())
    best_b, best = -1, -np.inf
    for b in range((V + BLOCK - 1) // BLOCK):
        sel = keep[(keep >= b * BLOCK) & (keep < (b + 1) * BLOCK)]
        if sel.size == 0:
            continue
        s = math.log(float(np.exp(a[sel].astype(np.float64) - mk).sum())) + mk
        score = s + float(gumbel(seed, step, pos, [b], SALT_BLOCK)[0])
        if best_b < 0 or score > best:
            best_b, best = b, score
    sel = keep[(keep >= best_b * BLOCK) & (keep < (best_b + 1) * BLOCK)]
    sc = a[sel].astype(np.float64) + gumbel(seed, step, pos, sel, SALT_TOKEN)
    token = int(sel[int(np.argmax(sc))])
    w = np.exp(a[keep].astype(np.float64) - mk)
    w /= w.sum()
    return token, amax, dict(zip(keep.tolist(), w.tolist()))


def sample(logits: np.ndarray, row_offsets: Optional[Sequence[int]] = None,
           positions: Optional[Sequence[int]] = None, **per_request) -> np.ndarray:
    """Tokens of a packed batch; per_request values are scalars or per-request sequences."""
    n = logits.shape[0]
    offs = list(row_offsets) if row_offsets is not None else list(range(n + 1))
    R = len(offs) - 1
    toks = np.zeros(n, np.int32)
    for r in range(R):
        kw = {key: (v[r] if isinstance(v, (list, tuple, np.ndarray)) else v)
              for key, v in per_request.items()}
        for i in range(offs[r], offs[r + 1]):
            pos = positions[i] if positions is not None else i - offs[r]
            toks[i] = sample_row(logits[i], pos=int(pos), **kw)[0]
    return toks


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X ~ chi-square(df): the regularised upper incomplete gamma Q(df/2, x/2)
    (series below a + 1, Lentz continued fraction above), for p-values without scipy."""
    a, z = 0.5 * df, 0.5 * x
    if z <= 0:
        return 1.0
    lg = a * math.log(z) - z - math.lgamma(a)
    if z < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > 1e-15 * abs(total):
            n += 1
            term *= z / n
            total += term
        return max(0.0, 1.0 - total * math.exp(lg))
    tiny = 1e-300
    b = z + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h * math.exp(lg)


def chi2_test(counts, probs) -> tuple:
    """(statistic, df, p-value) of observed counts against exact probabilities (cells with
    probability 0 must have no counts)."""
    counts = np.asarray(counts, np.float64)
    probs = np.asarray(probs, np.float64)
    assert counts[probs == 0].sum() == 0, "draws outside the support"
    keep = probs > 0
    n = counts.sum()
    exp = n * probs[keep]
    stat = float(((counts[keep] - exp) ** 2 / exp).sum())
    df = int(keep.sum()) - 1
    return stat, df, chi2_sf(stat, df)
