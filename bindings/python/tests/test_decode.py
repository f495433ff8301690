"""Sampler.reveal and Sampler.verify_drafts (dds_reveal / dds_verify_drafts) on the CPU backend."""

import math

import numpy as np
import pytest

import dds


def ref_top(scores, pos, eligible, n):
    idx = [i for i in range(len(scores)) if eligible[i]]
    key = [(-(s if not np.isnan(s) else -np.inf), p, i)
           for i, s, p in zip(idx, scores[idx], pos[idx])]
    return sorted(i for _, _, i in sorted(key)[:n])


def test_reveal_top_n_counts_and_steps_left():
    rng = np.random.default_rng(0)
    scores = rng.random(12).astype(np.float32)
    scores[3] = np.nan
    offs = [0, 5, 12]
    elig = np.ones(12, bool)
    elig[6] = False
    with dds.Sampler(vocab_size=8) as s:
        r = s.reveal(scores, row_offsets=offs, eligible=elig, count=[2, 0], steps_left=[1, 3],
                     outputs=("reveal", "num_revealed", "request_status"))
    assert r.reveal.dtype == np.uint8
    want = ref_top(scores[0:5], np.arange(5), elig[0:5], 2)
    assert sorted(np.nonzero(r.reveal[0:5])[0].tolist()) == want
    m = int(elig[5:12].sum())
    want = ref_top(scores[5:12], np.arange(7), elig[5:12], math.ceil(m / 3))
    assert sorted(np.nonzero(r.reveal[5:12])[0].tolist()) == want
    np.testing.assert_array_equal(r.num_revealed, [2, math.ceil(m / 3)])
    np.testing.assert_array_equal(r.request_status, 0)


def test_reveal_threshold_factor_random_and_bad_policy():
    scores = np.array([0.95, 0.5, 0.97, 0.2, 0.6, 0.7, 0.65, 0.1], np.float32)
    offs = [0, 4, 8]
    with dds.Sampler(vocab_size=8) as s:
        r = s.reveal(scores, row_offsets=offs, policy="threshold", threshold=0.9,
                     outputs=("reveal", "num_revealed"))
        assert r.reveal.tolist() == [1, 0, 1, 0, 0, 0, 0, 0][:4] + [0, 1, 0, 0]  # >= 0.9, or best
        f = s.reveal(scores, row_offsets=offs, policy=["factor", "factor"], factor=1.0)
        # request 0 ranked 0.97, 0.95, 0.5: k=2 needs 0.95 >= 1 - 1/3 -> yes; k=3: 0.5 >= 0.75 no
        assert f.reveal[:4].tolist() == [1, 0, 1, 0]
        a = s.reveal(scores, row_offsets=offs, policy="random", count=2, seed=5, step=1)
        b = s.reveal(scores, row_offsets=offs, policy="random", count=2, seed=5, step=1)
        c = s.reveal(scores, row_offsets=offs, policy="random", count=2, seed=6, step=1)
        np.testing.assert_array_equal(a.reveal, b.reveal)
        assert a.reveal[:4].sum() == 2 and a.reveal[4:].sum() == 2
        assert any(not np.array_equal(s.reveal(scores, row_offsets=offs, policy="random",
                                               count=2, seed=k).reveal, c.reveal)
                   for k in range(7, 12))
        bad = s.reveal(scores, row_offsets=offs, policy=np.array([7, 1], np.int32),
                       outputs=("reveal", "request_status"))
        assert bad.request_status[0] & dds.REQ_BAD_POLICY
        with pytest.raises(ValueError, match="policy"):
            s.reveal(scores, policy="best")


def test_reveal_canvas_and_eos_rule():
    MASK, EOS = 9, 8
    canvas = np.array([[1, MASK, MASK, MASK], [2, 3, MASK, MASK]], np.int32)
    scores = np.array([0.9, 0.8, 0.1, 0.7, 0.6], np.float32)
    pos = np.array([1, 2, 3, 2, 3], np.int32)
    toks = np.array([4, EOS, 5, EOS, 6], np.int32)
    with dds.Sampler(vocab_size=10) as s:
        r = s.reveal(scores, row_offsets=[0, 3, 5], positions=pos, count=[2, 2], canvas=canvas,
                     tokens=toks, mask_token=MASK, eos_token=EOS,
                     outputs=("reveal", "finished", "num_revealed"))
    assert canvas.tolist() == [[1, 4, EOS, MASK], [2, 3, EOS, 6]]
    np.testing.assert_array_equal(r.num_revealed, [2, 2])
    np.testing.assert_array_equal(r.finished, [1, 1])  # an EOS, nothing masked before it
    with dds.Sampler(vocab_size=10) as s:
        with pytest.raises(ValueError, match="tokens"):
            s.reveal(scores, row_offsets=[0, 3, 5], canvas=canvas)
        with pytest.raises(TypeError, match="canvas"):
            s.reveal(scores, row_offsets=[0, 3, 5], canvas=canvas.astype(np.int64), tokens=toks)


def test_verify_identical_distributions_accept_everything():
    rng = np.random.default_rng(1)
    V, R, n = 50, 6, 3
    target = rng.standard_normal((R * (n + 1), V)).astype(np.float32)
    draft = target.reshape(R, n + 1, V)[:, :n].reshape(R * n, V).copy()
    dtoks = rng.integers(0, V, size=(R, n)).astype(np.int32)
    with dds.Sampler(vocab_size=V) as s:
        r = s.verify_drafts(target, draft, dtoks, seed=np.arange(R, dtype=np.uint64),
                            outputs=("accepted_counts", "tokens", "logprobs", "request_status"))
        # 3-D layouts give the same answer
        r3 = s.verify_drafts(target.reshape(R, n + 1, V), draft.reshape(R, n, V), dtoks,
                             seed=np.arange(R, dtype=np.uint64))
    np.testing.assert_array_equal(r.accepted_counts, n)
    np.testing.assert_array_equal(r.tokens[:, :n], dtoks)
    assert np.all((r.tokens[:, n] >= 0) & (r.tokens[:, n] < V))
    assert np.all(np.isfinite(r.logprobs))
    np.testing.assert_array_equal(r3.tokens, r.tokens)


def test_verify_rejects_impossible_drafts_and_counts():
    V, R, n = 6, 4, 2
    target = np.zeros((R * (n + 1), V), np.float32)
    target[:, 0] = -np.inf  # the target never emits token 0
    draft = np.zeros((R * n, V), np.float32)
    dtoks = np.zeros((R, n), np.int32)
    with dds.Sampler(vocab_size=V) as s:
        r = s.verify_drafts(target, draft, dtoks, draft_counts=[2, 1, 0, 2], seed=3,
                            outputs=("accepted_counts", "tokens", "logprobs"))
    np.testing.assert_array_equal(r.accepted_counts, 0)
    assert np.all(r.tokens[:, 0] != 0) and np.all(r.tokens[:, 1:] == -1)
    assert np.all(r.logprobs[:, 1:] == -np.inf)


def test_verify_first_token_follows_the_target():
    """The first output token is distributed as the target p_0, whatever the draft."""
    V, R = 5, 20000
    p = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    q = np.array([0.1, 0.1, 0.2, 0.3, 0.3])
    target = np.tile(np.log(p).astype(np.float32), (2 * R, 1))
    draft = np.tile(np.log(q).astype(np.float32), (R, 1))
    dtoks = np.random.default_rng(2).choice(V, size=(R, 1), p=q).astype(np.int32)
    with dds.Sampler(vocab_size=V, max_rows=2 * R, max_requests=R) as s:
        r = s.verify_drafts(target, draft, dtoks, seed=np.arange(R, dtype=np.uint64) + 11)
    counts = np.bincount(r.tokens[:, 0], minlength=V)
    chi2 = float(((counts - R * p) ** 2 / (R * p)).sum())
    assert chi2 < 23.5, (chi2, counts)  # df = 4, p = 1e-4
    acc = r.accepted_counts.mean()
    assert abs(acc - np.minimum(p, q).sum()) < 0.02


def test_verify_bad_arguments():
    with dds.Sampler(vocab_size=4) as s:
        t = np.zeros((6, 4), np.float32)
        with pytest.raises(ValueError, match="target_logits"):
            s.verify_drafts(t, np.zeros((4, 4), np.float32), np.zeros((2, 3), np.int32))
        with pytest.raises(ValueError, match="draft_logits"):
            s.verify_drafts(t, None, np.zeros((2, 2), np.int32))
        with pytest.raises(TypeError, match="draft_logits"):
            s.verify_drafts(t, np.zeros((4, 4), np.float16), np.zeros((2, 2), np.int32))
        r = s.verify_drafts(np.zeros((3, 4), np.float32), seed=[1, 2, 3])  # no drafts: bonus only
        np.testing.assert_array_equal(r.accepted_counts, 0)
        assert r.tokens.shape == (3, 1)
