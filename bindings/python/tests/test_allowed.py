"""Allowed-token bitmasks (allowed_token_masks=) and the entropy-bound reveal policy through
dds.Sampler on the CPU backend: a masked call equals the call on logits whose disallowed
columns are -inf (the same random draws: exact tokens and statistics), for sample,
stash_logprobs and verify_drafts; reveal "entropy_bound" against a brute-force rule."""

import math

import numpy as np
import pytest

import dds

ALL = ("tokens", "logprobs", "argmax", "confidence", "margin", "entropy", "probs",
       "request_status")


def pack(allowed):
    """[R, V] bools -> [R, ceil(V / 32)] int32 words (bit t % 32 of word t // 32)."""
    R, V = allowed.shape
    W = (V + 31) // 32
    bits = np.zeros((R, W * 32), dtype=bool)
    bits[:, :V] = allowed
    words = (bits.reshape(R, W, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(2)
    return words.astype(np.uint32).view(np.int32)


def masked(x, allowed, offs):
    y = x.copy()
    for r in range(len(offs) - 1):
        y[offs[r]:offs[r + 1], ~allowed[r]] = -np.inf
    return y


@pytest.mark.parametrize("V", [5, 33, 1100])
@pytest.mark.parametrize("stats", ["processed", "guided"])
def test_sample_masked_equals_minus_inf(rng, V, stats):
    offs = [0, 2, 5, 6]
    x = (3 * rng.standard_normal((6, V))).astype(np.float32)
    allowed = rng.random((3, V)) < 0.5
    allowed[:, 0] = True
    kw = dict(row_offsets=offs, temperature=[1.0, 0.6, 0.0], top_k=[0, 4, 0],
              top_p=[1.0, 1.0, 0.9], seed=[3, 4, 5], step=2, banned_token=1, stats=stats,
              outputs=ALL)
    with dds.Sampler(vocab_size=V, max_rows=8) as s:
        got = s.sample(x, allowed_token_masks=pack(allowed), **kw)
        ref = s.sample(masked(x, allowed, offs), **kw)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)
    for r in range(3):
        for i in range(offs[r], offs[r + 1]):
            assert allowed[r, got.tokens[i]] and allowed[r, got.argmax[i]]


def test_sample_mask_shapes_and_errors(rng):
    V = 40
    x = rng.standard_normal((1, V)).astype(np.float32)
    only = np.zeros((1, V), dtype=bool)
    only[0, 37] = True
    with dds.Sampler(vocab_size=V, max_rows=4) as s:
        m = pack(only)
        for masks in (m, m[0], m[0].tolist(), m.view(np.uint32)):
            r = s.sample(x, allowed_token_masks=masks, outputs=("tokens", "entropy"))
            assert r.tokens[0] == 37 and r.entropy[0] == 0.0
        # A padded stride (more words than needed) and a strided view.
        wide = np.full((1, 5), -1, dtype=np.int32)
        wide[0, :2] = m[0]
        assert s.sample(x, allowed_token_masks=wide).tokens[0] == 37
        # Nothing allowed: the empty-row rule.
        r = s.sample(x, allowed_token_masks=np.zeros((1, 2), np.int32),
                     outputs=("tokens", "request_status"))
        assert r.tokens[0] == 0 and r.request_status[0] & dds.REQ_EMPTY_ROW
        with pytest.raises(ValueError, match="allowed_token_masks: has 1 words per request"):
            s.sample(x, allowed_token_masks=np.zeros((1, 1), np.int32))
        with pytest.raises(ValueError, match="allowed_token_masks: has 2 rows"):
            s.sample(x, allowed_token_masks=np.zeros((2, 2), np.int32))
        with pytest.raises(TypeError, match="allowed_token_masks"):
            s.sample(x, allowed_token_masks="everything")


def test_stash_masked_equals_minus_inf(rng):
    V = 70
    offs = [0, 3, 5]
    x = (2 * rng.standard_normal((5, V))).astype(np.float32)
    allowed = rng.random((2, V)) < 0.4
    with dds.Sampler(vocab_size=V, max_rows=8, max_stash_width=8) as s:
        got = s.stash_logprobs(x, row_offsets=offs, num_top=6, temperature=0.8,
                               allowed_token_masks=pack(allowed))
        ref = s.stash_logprobs(masked(x, allowed, offs), row_offsets=offs, num_top=6,
                               temperature=0.8)
    np.testing.assert_array_equal(got.token_ids, ref.token_ids)
    np.testing.assert_array_equal(got.logprobs, ref.logprobs)
    np.testing.assert_array_equal(got.ranks, ref.ranks)
    for r in range(2):
        assert allowed[r, got.token_ids[r][:offs[r + 1] - offs[r]]].all()


def test_verify_masked_equals_minus_inf(rng):
    V, n, R = 30, 2, 3
    draft = rng.standard_normal((R * n, V)).astype(np.float32)
    target = rng.standard_normal((R * (n + 1), V)).astype(np.float32)
    allowed = rng.random((R, V)) < 0.5
    allowed[:, 0] = True
    dm = draft.copy()
    tm = target.copy()
    for r in range(R):
        dm[r * n:(r + 1) * n, ~allowed[r]] = -np.inf
        tm[r * (n + 1):(r + 1) * (n + 1), ~allowed[r]] = -np.inf
    with dds.Sampler(vocab_size=V, max_rows=16) as s:
        for seed in range(10):
            drafts = rng.integers(0, V, (R, n)).astype(np.int32)
            kw = dict(seed=seed, outputs=("accepted_counts", "tokens", "logprobs"))
            got = s.verify_drafts(target, draft, drafts, allowed_token_masks=pack(allowed), **kw)
            ref = s.verify_drafts(tm, dm, drafts, **kw)
            np.testing.assert_array_equal(got.accepted_counts, ref.accepted_counts)
            np.testing.assert_array_equal(got.tokens, ref.tokens)
            np.testing.assert_array_equal(got.logprobs, ref.logprobs)


def eb_reference(ent, bound):
    """The EB rule by brute force over one request (every row eligible, positions = index)."""
    bound = 0.0 if (math.isnan(bound) or bound < 0) else bound
    e = [math.inf if math.isnan(v) else v for v in ent]
    order = sorted(range(len(e)), key=lambda i: (e[i], i))
    best = 1
    for k in range(1, len(order) + 1):
        vals = [max(0.0, e[i]) for i in order[:k]]
        if sum(sorted(vals)[:-1]) <= bound:
            best = k
    out = np.zeros(len(e), dtype=np.uint8)
    out[order[:best]] = 1
    return out


def test_reveal_entropy_bound(rng):
    with dds.Sampler(vocab_size=4, max_rows=64) as s:
        ent = np.array([0.3, 0.1, 0.05, 0.5, np.nan], dtype=np.float32)
        r = s.reveal(ent, row_offsets=[0, 5], policy="entropy_bound", entropy_bound=0.2,
                     outputs=("reveal", "num_revealed"))
        assert r.reveal.tolist() == [1, 1, 1, 0, 0] and r.num_revealed.tolist() == [3]
        # Per request bounds, like threshold=; default 0.1.
        offs = [0, 3, 6]
        ent = np.array([0.05, 0.05, 0.05, 0.0, 0.2, 0.3], dtype=np.float32)
        r = s.reveal(ent, row_offsets=offs, policy="entropy_bound", entropy_bound=[0.0, 0.25])
        assert r.reveal.tolist() == [1, 0, 0, 1, 1, 1]
        r = s.reveal(ent, row_offsets=offs, policy="entropy_bound")
        assert r.reveal.tolist() == [1, 1, 1, 1, 1, 0]
        r = s.reveal(ent, row_offsets=offs, policy=[4, "entropy_bound"],
                     entropy_bound=np.array([np.nan, 0.2], np.float32),
                     outputs=("reveal", "request_status"))
        assert r.request_status.tolist() == [dds.REQ_BAD_ENTROPY_BOUND, 0]
        with pytest.raises(dds.ArgumentError, match="entropy_bound"):
            s.reveal(ent, policy="entropy_bound", entropy_bound=-1.0)
        for _ in range(50):
            m = int(rng.integers(1, 20))
            ent = np.round(rng.random(m) * 8) / 8
            ent = ent.astype(np.float32)
            bound = float(np.round(rng.random() * 16) / 8)
            r = s.reveal(ent, policy="entropy_bound", entropy_bound=bound,
                         row_offsets=[0, m])
            np.testing.assert_array_equal(r.reveal, eb_reference(ent.tolist(), bound))
