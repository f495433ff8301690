"""dds.omnivoice.OmniVoiceSampler (mstar's DiffusionSamplerResource contract) on the CPU backend,
against a float64 NumPy implementation of OmniVoice's scoring (log_softmax guidance, forbidden
class after normalisation, top-ratio filter, Gumbel at temperature T) and the spec reference."""

import math
import os
import runpy
import sys

import numpy as np
import pytest

import reference as ref
from dds.omnivoice import OmniVoiceSampler, RequestConfig


def log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def omnivoice_log_probs(c, u, g, forbidden):
    """OmniVoice's scores in float64: log_softmax((1 + g) ls(c) - g ls(u)), forbidden -> -inf."""
    plain = log_softmax(c)
    lp = plain if g == 0 else log_softmax(plain + g * (plain - log_softmax(u)))
    lp = lp.copy()
    if forbidden is not None:
        lp[..., forbidden] = -np.inf
    return lp


def omnivoice_dist(c, u, g, temperature, top_ratio, forbidden):
    """The distribution OmniVoice's Gumbel draw samples from, float64 [V]."""
    lp = omnivoice_log_probs(c, u, g, forbidden)
    k = max(1, math.ceil(top_ratio * lp.shape[-1]))
    keep = np.argsort(-lp, kind="stable")[:k]
    x = np.full_like(lp, -np.inf)
    x[keep] = lp[keep] / temperature
    p = np.exp(x - x.max())
    return p / p.sum()


C, V, MASK = 8, 1025, 1024
CFGS = {"a": RequestConfig(guidance_scale=2.0, temperature=0.9, seed=11),
        "b": RequestConfig(guidance_scale=0.0, temperature=1.2, seed=12),
        "c": RequestConfig(guidance_scale=1.5, temperature=0.0, seed=13),
        "d": RequestConfig(guidance_scale=0.5, temperature=1.0, top_ratio=0.3, seed=14)}


def make_batch(rng, lens, ids):
    P = sum(lens)
    c = (2.0 * rng.standard_normal((C, P, V))).astype(np.float32)
    u = (c + rng.standard_normal((C, P, V))).astype(np.float32)
    c[..., MASK] += 3.0  # the forbidden class holds real mass: the renormalisation matters
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    guided = [CFGS[i].guidance_scale != 0 for i in ids]
    u_compact = np.concatenate([u[:, s:s + n] for s, n, gd in zip(starts, lens, guided) if gd],
                               axis=1)
    return c, u, u_compact, starts


def test_mixed_batch_exact_tokens_and_logprobs():
    rng = np.random.default_rng(7)
    ids, lens, iters = ["a", "b", "c", "d"], [5, 3, 4, 2], [0, 6, 3, 17]
    c, u, u_compact, starts = make_batch(rng, lens, ids)
    with OmniVoiceSampler(V, C, MASK, max_positions=64) as s:
        for rid in ids:
            s.ingest_request(rid, CFGS[rid])
        tok, lp = s.sample(ids, c, u_compact, lens, iters)
        tok_full, lp_full = s.sample(ids, c, u, lens, iters)  # mstar's full-shape u_logits
        alone = s.sample(["d"], c[:, starts[3]:], u[:, starts[3]:], [2], [17])
    assert tok.shape == (C, sum(lens)) and tok.dtype == np.int64 and lp.dtype == np.float32
    np.testing.assert_array_equal(tok, tok_full)
    np.testing.assert_array_equal(lp, lp_full)
    np.testing.assert_array_equal(alone[0], tok[:, starts[3]:])  # batch-independent draws
    for r, (rid, n, it) in enumerate(zip(ids, lens, iters)):
        cfg = CFGS[rid]
        for cb in range(C):
            for t in range(n):
                p = starts[r] + t
                want, _, _ = ref.sample_row(c[cb, p], u=u[cb, p], guidance_scale=cfg.guidance_scale,
                                            temperature=cfg.temperature,
                                            top_k=math.ceil(cfg.top_ratio * V), seed=cfg.seed,
                                            step=it, pos=cb * n + t, banned_token=MASK)
                assert tok[cb, p] == want, (rid, cb, t)
                olp = omnivoice_log_probs(c[cb, p], u[cb, p], cfg.guidance_scale, MASK)
                assert lp[cb, p] == pytest.approx(olp[want], rel=2e-5, abs=2e-5), (rid, cb, t)
    assert not np.any(tok == MASK)
    # greedy request: OmniVoice's argmax of its guided scores
    r = 2
    sl = slice(starts[r], starts[r] + lens[r])
    olp = omnivoice_log_probs(c[:, sl], u[:, sl], CFGS["c"].guidance_scale, MASK)
    np.testing.assert_array_equal(tok[:, sl], olp.argmax(-1))


def test_guidance_form_identity_float64():
    """log_softmax((1+g) ls(c) - g ls(u)) == log_softmax(c + g (c - u)): same distribution at
    every temperature, same top-k set (the module docstring's argument, checked numerically)."""
    rng = np.random.default_rng(3)
    for g in (0.5, 1.0, 2.0, 3.5):
        c = 3 * rng.standard_normal((16, 200))
        u = c + rng.standard_normal((16, 200))
        omni = log_softmax((1 + g) * log_softmax(c) - g * log_softmax(u))
        dds_form = log_softmax(c + g * (c - u))
        np.testing.assert_allclose(omni, dds_form, rtol=0, atol=1e-11)
        for T in (0.5, 1.3):
            np.testing.assert_allclose(np.exp(log_softmax(omni / T)),
                                       np.exp(log_softmax(dds_form / T)), rtol=0, atol=1e-12)
        np.testing.assert_array_equal(np.argsort(-omni, axis=-1, kind="stable")[:, :20],
                                      np.argsort(-dds_form, axis=-1, kind="stable")[:, :20])


@pytest.mark.parametrize("g,temperature,top_ratio", [(1.5, 0.8, 0.5), (0.0, 1.0, 1.0),
                                                     (3.0, 1.3, 0.25)])
def test_chi_square_against_omnivoice_form(g, temperature, top_ratio):
    """8 x 12500 = 1e5 cells of one request, every cell the same (c, u) row: the draws follow
    the float64 OmniVoice-form distribution (fixed seed: deterministic)."""
    Vs, mask, T = 24, 23, 12500
    rng = np.random.default_rng(5)
    c_row = rng.standard_normal(Vs).astype(np.float32)
    u_row = (c_row + rng.standard_normal(Vs)).astype(np.float32)
    c_row[mask] = 2.0
    c = np.ascontiguousarray(np.broadcast_to(c_row, (C, T, Vs)))
    u = np.ascontiguousarray(np.broadcast_to(u_row, (C, T, Vs)))
    with OmniVoiceSampler(Vs, C, mask, max_positions=T) as s:
        s.ingest_request("r", guidance_scale=g, temperature=temperature, top_ratio=top_ratio,
                         seed=99)
        tok, lp = s.sample(["r"], c, u if g else None, [T], [4])
    want = omnivoice_dist(c_row, u_row, g, temperature, top_ratio, mask)
    stat, df, pval = ref.chi2_test(np.bincount(tok.reshape(-1), minlength=Vs), want)
    print(f"omnivoice chi-square g={g} T={temperature} ratio={top_ratio}: {stat:.2f}, df {df}, "
          f"p = {pval:.3g}")
    assert pval > 1e-4, (stat, df, pval)
    olp = omnivoice_log_probs(c_row, u_row, g, mask)
    np.testing.assert_allclose(lp, olp[tok], rtol=2e-5, atol=2e-5)


def test_bad_arguments():
    rng = np.random.default_rng(0)
    c = rng.standard_normal((C, 6, 32)).astype(np.float32)
    with OmniVoiceSampler(32, C, 31) as s:
        s.ingest_request("g", guidance_scale=1.0, temperature=1.0)
        s.ingest_request("p", temperature=1.0)
        with pytest.raises(ValueError, match="u_logits"):
            s.sample(["g", "p"], c, None, [3, 3])
        with pytest.raises(ValueError, match="u_logits"):
            s.sample(["g", "p"], c, c[:, :4], [3, 3])
        with pytest.raises(ValueError, match="seq_lens"):
            s.sample(["g", "p"], c, c, [3, 2])
        with pytest.raises(ValueError, match="seq_lens"):
            s.sample(["g"], c, c, [3, 3])
        with pytest.raises(ValueError, match="iterations"):
            s.sample(["p"], c, None, [6], [1, 2])
        with pytest.raises(ValueError, match="c_logits"):
            s.sample(["p"], c[0], None)
        with pytest.raises(ValueError, match="c_logits"):
            s.sample(["p"], c[:4], None)
        with pytest.raises(ValueError, match="top_ratio"):
            s.ingest_request("x", top_ratio=0.0)
        with pytest.raises(ValueError, match="forbidden_class"):
            OmniVoiceSampler(32, C, 32)


def test_example_decode_loop_runs():
    """examples/python/omnivoice_loop.py end to end on the CPU backend (small settings)."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "python",
                        "omnivoice_loop.py")
    argv = sys.argv
    sys.argv = [path, "--backend", "cpu", "--frames", "12,7,9", "--steps", "16"]
    try:
        with pytest.raises(SystemExit) as e:
            runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv = argv
    assert e.value.code == 0


def test_batch_arrays_reused_across_steps_and_rebuilt_on_change():
    """A decode loop's steps reuse the batch's arrays: each call equals a fresh sampler's,
    with per-request iterations, and a changed knob, batch or shape is taken at once."""
    rng = np.random.default_rng(5)
    ids, lens = ["a", "b", "c"], [3, 4, 2]
    c = rng.standard_normal((C, 9, V)).astype(np.float32) * 2
    u = c[:, :3] + rng.standard_normal((C, 3, V)).astype(np.float32)  # "a" guided only
    cfgs = {"a": RequestConfig(guidance_scale=2.0, temperature=0.9, seed=11),
            "b": RequestConfig(temperature=0.7, seed=12), "c": RequestConfig(seed=13)}

    def fresh(ids_, c_, u_, lens_, iters):
        with OmniVoiceSampler(V, C, MASK) as f:
            for rid in ids_:
                f.ingest_request(rid, cfgs[rid])
            return f.sample(ids_, c_, u_, lens_, iters)

    with OmniVoiceSampler(V, C, MASK) as s:
        for rid in ids:
            s.ingest_request(rid, cfgs[rid])
        for iters in ([0, 0, 0], [1, 1, 1], [2, 5, 7], [2, 5, 7]):
            got, want = s.sample(ids, c, u, lens, iters), fresh(ids, c, u, lens, iters)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
        before = s.sample(ids, c, u, lens, [3, 3, 3])
        cfgs["b"] = RequestConfig(temperature=0.7, seed=99)
        s.ingest_request("b", cfgs["b"])
        after = s.sample(ids, c, u, lens, [3, 3, 3])
        np.testing.assert_array_equal(after[0], fresh(ids, c, u, lens, [3, 3, 3])[0])
        assert not np.array_equal(after[0][:, 3:7], before[0][:, 3:7])
        np.testing.assert_array_equal(after[0][:, :3], before[0][:, :3])
        ids2, lens2 = ["b", "a"], [4, 3]
        c2 = np.concatenate([c[:, 3:7], c[:, :3]], axis=1)
        got, want = s.sample(ids2, c2, u, lens2, [4, 4]), fresh(ids2, c2, u, lens2, [4, 4])
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        with pytest.raises(ValueError, match="seq_lens"):
            s.sample(ids2, c2, u, [4, 2], [4, 4])
