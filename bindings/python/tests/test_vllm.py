"""dds.vllm (vLLM DiffusionGemma's sample_row_stats / stash_converged_logprobs / EB-sampler rule)
against a float64 NumPy reference written from the contract (docs in dds/vllm.py), on the CPU
backend: numpy arrays always, torch CPU tensors where torch is installed. The tests of the
allowed token sets and of the entropy-bound reveal need those dds primitives and skip, saying
so, when the loaded dds lacks them (feature detection, not a pass)."""

import math

import numpy as np
import pytest

import dds
import reference
from dds import vllm as ddsv

try:
    import torch
except ImportError:  # CI: no torch
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
needs_masks = pytest.mark.skipif(not ddsv.supports_allowed_token_masks(),
                                 reason="this dds has no allowed_token_masks (primitive not "
                                        "merged yet)")
needs_eb = pytest.mark.skipif(not ddsv.supports_entropy_bound(),
                              reason="this dds has no 'entropy_bound' reveal policy (primitive "
                                     "not merged yet)")


# -- the reference, from the contract -----------------------------------------------------------
def ref_tempered(row, T):
    """fp32 tempered values as dds forms them (l * (1 / max(T, 1e-10)) in fp32), in float64."""
    inv = np.float32(1.0) / np.float32(max(float(T), 1e-10))
    with np.errstate(over="ignore"):
        return (np.asarray(row, np.float32) * inv).astype(np.float64)


def ref_softmax(v):
    fin = np.isfinite(v)
    m = v[fin].max()
    e = np.where(fin, np.exp(np.where(fin, v - m, 0.0)), 0.0)
    return e / e.sum()


def ref_row_stats(logits, temps, cl):
    rows = logits.shape[0]
    am, ent, probs = np.zeros(rows, np.int64), np.zeros(rows), np.zeros(logits.shape)
    for i in range(rows):
        v = ref_tempered(logits[i], temps[i // cl])
        p = ref_softmax(v)
        am[i] = int(np.argmax(logits[i]))
        nz = p > 0
        ent[i] = -(p[nz] * np.log(p[nz])).sum()
        probs[i] = p
    return am, ent, probs


def ref_stash(logits, cl, src, slots, keep, valid, temps, num_topk, num_token_ids, token_ids,
              width, logits_mode, S, W, fill):
    ids = np.full((S, W, width + 1), fill[0], np.int64)
    lps = np.full((S, W, width + 1), fill[1], np.float64)
    ranks = np.full((S, W), fill[2], np.int64)
    for j in range(len(src)):
        if not keep[j]:
            continue
        for p in range(valid[j]):
            v = ref_tempered(logits[src[j] * cl + p], temps[j])
            fin = np.isfinite(v)
            m = v[fin].max()
            logz = m + math.log(np.exp(v[fin] - m).sum())
            val = v if logits_mode else v - logz
            amx = int(np.argmax(v))
            if token_ids is not None and num_token_ids[j] > 0:
                extra = list(token_ids[j, :num_token_ids[j]])
            else:
                extra = sorted(range(len(v)), key=lambda t: (-v[t], t))[:num_topk]
            row_ids = [amx] + [int(t) for t in extra]
            row_ids += [0] * (width + 1 - len(row_ids))
            row_lp = [val[t] for t in row_ids[:1 + len(extra)]]
            row_lp += [-np.inf] * (width + 1 - len(row_lp))
            ids[slots[j], p] = row_ids
            lps[slots[j], p] = row_lp
            ranks[slots[j], p] = int((v >= v[amx]).sum())
    return ids, lps, ranks


def tied_logits(rng, rows, V):
    x = rng.standard_normal((rows, V)).astype(np.float32) * 2
    for i in range(0, rows, 3):  # every third row: k = 2..4 tied maxima
        k = 2 + (i // 3) % 3
        cols = rng.choice(V, k, replace=False)
        x[i, cols] = x[i].max() + 1
    return x


# -- sample_row_stats ---------------------------------------------------------------------------
def test_row_stats_match_reference(rng):
    V, cl = 300, 5
    temps = np.array([1.0, 0.0, 0.7, 1e-12, 2.5], np.float32)
    x = tied_logits(rng, len(temps) * cl, V)
    x[7, 10:200] = -np.inf  # a row filtered to a few columns (top_k / top_p style)
    am, smp, ent, probs = ddsv.sample_row_stats(x, temps, cl, 1234, np.float32)
    assert am.dtype == np.int64 and smp.dtype == np.int64 and ent.dtype == np.float32
    assert probs.dtype == np.float32 and probs.shape == x.shape
    r_am, r_ent, r_probs = ref_row_stats(x, temps, cl)
    np.testing.assert_array_equal(am, r_am)
    np.testing.assert_allclose(ent, r_ent, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probs, r_probs, rtol=1e-5, atol=1e-7)
    # T = 0 rows: greedy (the lowest tied id), entropy log k over k tied maxima
    g = slice(cl, 2 * cl)
    np.testing.assert_array_equal(smp[g], am[g])
    ties = (x[g] == x[g].max(axis=1, keepdims=True)).sum(axis=1)
    np.testing.assert_allclose(ent[g], np.log(ties), atol=1e-6)
    assert (ties > 1).any()
    # every sample lies in its row's support; T in (0, 1e-10) samples among the tied maxima
    assert all(r_probs[i, smp[i]] > 0 for i in range(len(smp)))
    t = slice(3 * cl, 4 * cl)
    assert (x[t][np.arange(cl), smp[t]] == x[t].max(axis=1)).all()


def test_row_stats_without_probs_and_partial_canvas(rng):
    V, cl = 64, 4
    temps = np.array([0.9, 0.0, 1.3], np.float32)
    x = rng.standard_normal((10, V)).astype(np.float32)  # 2.5 canvases
    am, smp, ent, probs = ddsv.sample_row_stats(x, temps, cl, 5, None)
    assert probs is None and am.shape == (10,) and smp.shape == (10,)
    r_am, r_ent, _ = ref_row_stats(x, temps, cl)
    np.testing.assert_array_equal(am, r_am)
    np.testing.assert_allclose(ent, r_ent, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(smp[4:8], am[4:8])
    # requests get their own noise: the same rows in two requests sample differently
    y = np.tile(rng.standard_normal((1, V)).astype(np.float32), (8, 1))
    _, s2, _, _ = ddsv.sample_row_stats(y, np.ones(2, np.float32), cl, 9, None)
    assert not np.array_equal(s2[:4], s2[4:])


def test_row_stats_float16_probs(rng):
    V, cl = 50, 2
    x = rng.standard_normal((4, V)).astype(np.float32)
    temps = np.array([0.8, 1.0], np.float32)
    _, _, _, probs = ddsv.sample_row_stats(x, temps, cl, 1, np.float16)
    _, _, r_probs = ref_row_stats(x, temps, cl)
    assert probs.dtype == np.float16
    np.testing.assert_allclose(probs.astype(np.float64), r_probs, rtol=2 ** -10, atol=1e-7)


def test_row_stats_chi_square():
    """6e4 draws (3 requests x 2e4 positions of one row) against softmax(l / T)."""
    V, cl = 12, 20_000
    row = np.linspace(-1.5, 1.0, V).astype(np.float32)
    x = np.ascontiguousarray(np.broadcast_to(row, (3 * cl, V)))
    temps = np.array([0.8, 0.8, 0.8], np.float32)
    _, smp, _, _ = ddsv.sample_row_stats(x, temps, cl, 2024, None)
    p = ref_softmax(ref_tempered(row, 0.8))
    chi2, df, pval = reference.chi2_test(np.bincount(smp, minlength=V), p)
    assert pval > 1e-4, (chi2, df, pval)  # fixed seed: deterministic


def test_row_stats_bad_arguments(rng):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    with pytest.raises(ValueError, match="temps"):
        ddsv.sample_row_stats(x, np.ones(1, np.float32), 4, 0, None)
    with pytest.raises(ValueError, match="canvas_len"):
        ddsv.sample_row_stats(x, np.ones(8, np.float32), 0, 0, None)
    with pytest.raises(TypeError, match="logits"):
        ddsv.sample_row_stats(x.tolist(), np.ones(8, np.float32), 4, 0, None)


# -- stash_converged_logprobs -------------------------------------------------------------------
def stash_case(rng, logits_mode, with_ids):
    V, cl, n = 200, 6, 5
    x = tied_logits(rng, n * cl, V)
    src = np.array([3, 0, 4, 1], np.int64)
    slots = np.array([2, 5, 0, 3], np.int64)
    keep = np.array([True, True, False, True])
    valid = np.array([6, 4, 6, 1], np.int64)
    temps = np.array([0.7, 0.0, 1.0, 1.3], np.float32)
    num_topk, width = (3, 5) if with_ids else (4, 4)
    if with_ids:
        num_token_ids = np.array([0, 2, 5, 5], np.int64)
        token_ids = rng.integers(0, V, (4, 5)).astype(np.int64)
    else:
        num_token_ids = token_ids = None
    S, W = 7, cl
    return (x, cl, src, slots, keep, valid, temps, num_topk, num_token_ids, token_ids, width,
            logits_mode, S, W)


@pytest.mark.parametrize("logits_mode", [False, True])
@pytest.mark.parametrize("with_ids", [False, True])
def test_stash_matches_reference(rng, logits_mode, with_ids):
    case = stash_case(rng, logits_mode, with_ids)
    (x, cl, src, slots, keep, valid, temps, num_topk, nids, tids, width, lm, S, W) = case
    fill = (-7, 99.0, -5)
    out_ids = np.full((S, W, width + 1), fill[0], np.int64)
    out_lp = np.full((S, W, width + 1), fill[1], np.float32)
    out_rk = np.full((S, W), fill[2], np.int64)
    ddsv.stash_converged_logprobs(x, cl, src, slots, keep, valid, temps, num_topk, nids, tids,
                                  out_ids, out_lp, out_rk, lm)
    r_ids, r_lp, r_rk = ref_stash(x, cl, src, slots, keep, valid, temps, num_topk, nids, tids,
                                  width, lm, S, W, fill)
    np.testing.assert_array_equal(out_ids, r_ids)
    np.testing.assert_array_equal(out_rk, r_rk)
    np.testing.assert_allclose(out_lp, r_lp, rtol=1e-6, atol=2e-5)
    assert (r_rk > 1).any()  # ties at the maximum were exercised


def test_stash_bad_arguments(rng):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    out_ids = np.zeros((2, 4, 3), np.int64)
    out_lp = np.zeros((2, 4, 3), np.float32)
    out_rk = np.zeros((2, 4), np.int64)
    one = np.zeros(1, np.int64)
    args = (x, 4, one, one, np.ones(1, bool), one + 4, np.ones(1, np.float32))
    with pytest.raises(ValueError, match="num_topk"):
        ddsv.stash_converged_logprobs(*args, 3, None, None, out_ids, out_lp, out_rk, False)
    with pytest.raises(ValueError, match="out_logprobs"):
        ddsv.stash_converged_logprobs(*args, 2, None, None, out_ids, out_lp[:1], out_rk, False)
    with pytest.raises(ValueError, match="temps"):
        ddsv.stash_converged_logprobs(x, 4, one, one, np.ones(1, bool), one + 4,
                                      np.ones(2, np.float32), 2, None, None, out_ids, out_lp,
                                      out_rk, False)


# -- torch CPU tensors --------------------------------------------------------------------------
@needs_torch
def test_torch_cpu_tensors(rng):
    V, cl = 128, 4
    temps = np.array([1.0, 0.0, 0.6], np.float32)
    x = tied_logits(rng, 12, V)
    xt = torch.from_numpy(x).to(torch.bfloat16)
    xb = xt.float().numpy()  # the bf16 values the library sees
    am, smp, ent, probs = ddsv.sample_row_stats(xt, torch.from_numpy(temps), cl, 3,
                                                torch.bfloat16)
    assert am.dtype == torch.int64 and smp.dtype == torch.int64 and ent.dtype == torch.float32
    assert probs.dtype == torch.bfloat16
    r_am, r_ent, r_probs = ref_row_stats(xb, temps, cl)
    np.testing.assert_array_equal(am.numpy(), r_am)
    np.testing.assert_allclose(ent.numpy(), r_ent, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probs.float().numpy(), r_probs, rtol=2 ** -8, atol=1e-9)
    np.testing.assert_array_equal(smp[4:8].numpy(), am[4:8].numpy())

    case = stash_case(rng, False, True)
    (x, cl, src, slots, keep, valid, temps, num_topk, nids, tids, width, lm, S, W) = case
    t = torch.from_numpy
    out_ids = torch.full((S, W, width + 1), -7, dtype=torch.int64)
    out_lp = torch.full((S, W, width + 1), 99.0)
    out_rk = torch.full((S, W), -5, dtype=torch.int64)
    ddsv.stash_converged_logprobs(t(x), cl, t(src), t(slots), t(keep), t(valid), t(temps),
                                  num_topk, t(nids), t(tids), out_ids, out_lp, out_rk, lm)
    r_ids, r_lp, r_rk = ref_stash(x, cl, src, slots, keep, valid, temps, num_topk, nids, tids,
                                  width, lm, S, W, (-7, 99.0, -5))
    np.testing.assert_array_equal(out_ids.numpy(), r_ids)
    np.testing.assert_array_equal(out_rk.numpy(), r_rk)
    np.testing.assert_allclose(out_lp.numpy(), r_lp, rtol=1e-6, atol=2e-5)


def compiled_step_equals_eager(rng, device, mode=None):
    """A DiffusionGemma step (row stats, EB-sampler acceptance, stash) compiled with
    fullgraph=True (no graph break: the sampler cache is resolved while tracing) equals the eager
    step, tokens included. The compiled step runs first, so the trace makes the samplers; with
    mode="reduce-overhead" it runs three times (warm-up, recording, replay)."""
    case = stash_case(rng, False, True)
    (x, cl, src, slots, keep, valid, temps, num_topk, nids, tids, width, lm, S, W) = case
    n = x.shape[0] // cl
    canvas_temps = np.linspace(0.0, 1.5, n).astype(np.float32)  # (one greedy canvas)
    args = tuple(torch.from_numpy(np.ascontiguousarray(a)).to(device)
                 for a in (x, canvas_temps, temps, src, slots, keep, valid, nids, tids))

    def step(xs, cts, ts, src_, slots_, keep_, valid_, nids_, tids_):
        am, smp, ent, probs = ddsv.sample_row_stats(xs, cts, cl, 11, torch.float32)
        accept = ddsv.entropy_bound_accept(ent[:n * cl].view(n, cl), 0.3)
        ids = torch.full((S, W, width + 1), -7, dtype=torch.int64, device=device)
        lp = torch.full((S, W, width + 1), 99.0, device=device)
        rk = torch.full((S, W), -5, dtype=torch.int64, device=device)
        ddsv.stash_converged_logprobs(xs, cl, src_, slots_, keep_, valid_, ts, num_topk, nids_,
                                      tids_, ids, lp, rk, lm)
        return am, smp, ent, probs, accept, ids, lp, rk

    dds._sampler.enable_torch()  # what `import dds` does when torch is imported first
    torch._dynamo.reset()
    try:
        compiled = torch.compile(step, fullgraph=True, mode=mode)
        for _ in range(3 if mode else 1):
            got = [g.clone() for g in compiled(*args)]
    finally:
        torch._dynamo.reset()
    want = step(*args)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=0, atol=0)


@needs_torch
@needs_eb
def test_torch_compile_fullgraph(rng):
    compiled_step_equals_eager(rng, "cpu")


# -- the EB-sampler rule ------------------------------------------------------------------------
def ref_eb(entropy, bound, valid=None):
    """vLLM's rule: sort by entropy (ties: position), accept while cumsum - cummax <= bound."""
    R, CL = entropy.shape
    out = np.zeros((R, CL), bool)
    for r in range(R):
        n = CL if valid is None else int(valid[r])
        order = sorted(range(n), key=lambda p: (entropy[r, p], p))
        s = np.cumsum(entropy[r, order].astype(np.float64))
        mx = np.maximum.accumulate(entropy[r, order].astype(np.float64))
        b = bound[r] if np.ndim(bound) else bound
        ok = (s - mx) <= b
        k = max(1, int(np.argmin(ok)) if not ok.all() else n)
        out[r, [order[i] for i in range(k)]] = True
    return out


@needs_eb
def test_entropy_bound_accept(rng):
    R, CL = 6, 32
    ent = (rng.random((R, CL)) ** 3 * 2).astype(np.float32)
    ent[2, :] = 0.04  # equal entropies: taken in position order
    for bound in (0.1, 0.5, 3.0):
        got = ddsv.entropy_bound_accept(ent, bound)
        np.testing.assert_array_equal(got.astype(bool), ref_eb(ent, bound))
    bounds = np.array([0.0, 0.2, 1.0, 5.0, 0.3, 100.0], np.float32)
    valid = np.array([32, 10, 1, 32, 20, 7], np.int32)
    got = ddsv.entropy_bound_accept(ent, bounds, valid=valid)
    np.testing.assert_array_equal(got.astype(bool), ref_eb(ent, bounds, valid))


def test_entropy_bound_unsupported_raises():
    if ddsv.supports_entropy_bound():
        pytest.skip("this dds has the entropy_bound policy (covered by test_entropy_bound_accept)")
    with pytest.raises(NotImplementedError, match="entropy_bound"):
        ddsv.entropy_bound_accept(np.zeros((2, 4), np.float32), 0.1)


# -- allowed token sets -------------------------------------------------------------------------
def test_allowed_token_mask_layout():
    m = ddsv.allowed_token_mask([[0, 31, 32, 69], None, []], 70)
    assert m.dtype == np.int32 and m.shape == (3, 3)
    u = m.view(np.uint32)
    assert u[0].tolist() == [1 | (1 << 31), 1, 1 << 5]
    assert (u[1] == 0xFFFFFFFF).all() and (u[2] == 0).all()
    with pytest.raises(ValueError, match="allowed"):
        ddsv.allowed_token_mask([[70]], 70)


@needs_masks
def test_allowed_sets_sample_and_stash(rng):
    V, cl = 100, 4
    temps = np.array([1.0, 0.0, 0.8], np.float32)
    x = rng.standard_normal((12, V)).astype(np.float32)
    sets = [list(range(0, 100, 7)), None, [3, 5, 99]]
    masks = ddsv.allowed_token_mask(sets, V)
    am, smp, ent, probs = ddsv.sample_row_stats(x, temps, cl, 11, np.float32,
                                                allowed_token_masks=masks)
    xm = x.copy()
    for r, s in enumerate(sets):
        if s is not None:
            off = np.setdiff1d(np.arange(V), s)
            xm[r * cl:(r + 1) * cl][:, off] = -np.inf
    r_am, r_ent, r_probs = ref_row_stats(xm, temps, cl)
    np.testing.assert_array_equal(am, r_am)
    np.testing.assert_allclose(ent, r_ent, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probs, r_probs, rtol=1e-5, atol=1e-7)
    assert all(r_probs[i, smp[i]] > 0 for i in range(12))
    # stash: canvases 0 and 2 converged, masks per canvas
    src, slots = np.array([0, 2]), np.array([1, 0])
    keep, valid = np.array([True, True]), np.array([4, 3])
    out = (np.zeros((2, cl, 4), np.int64), np.zeros((2, cl, 4), np.float32),
           np.zeros((2, cl), np.int64))
    ddsv.stash_converged_logprobs(x, cl, src, slots, keep, valid, temps[[0, 2]], 3, None, None,
                                  *out, False, allowed_token_masks=masks)
    r = ref_stash(xm, cl, src, slots, keep, valid, temps[[0, 2]], 3, None, None, 3, False, 2,
                  cl, (0, 0.0, 0))
    np.testing.assert_array_equal(out[0], r[0])
    np.testing.assert_array_equal(out[2], r[2])
    np.testing.assert_allclose(out[1], r[1], rtol=1e-6, atol=2e-5)


# -- CUDA (marker gpu; gpu-test.sh runs these on the GPU machine) -------------------------------
@pytest.fixture(scope="module")
def cuda():
    # gpu-test.sh sets DDS_REQUIRE_GPU=1: there a missing device is a failure, not a skip
    import os
    why = ("torch is not installed" if torch is None else
           "torch sees no CUDA device" if not torch.cuda.is_available() else
           "libdds has no CUDA backend" if not dds.has_cuda() else None)
    if why:
        if os.environ.get("DDS_REQUIRE_GPU") == "1":
            pytest.fail(f"DDS_REQUIRE_GPU=1 but {why}")
        pytest.skip(why)
    return torch


@pytest.mark.gpu
def test_cuda_matches_cpu_and_replays_in_a_graph(cuda, rng):
    V, cl = 5000, 8
    temps = np.array([1.0, 0.0, 0.6, 0.3], np.float32)
    x = tied_logits(rng, 4 * cl, V)
    xd = cuda.from_numpy(x).cuda().to(cuda.bfloat16)
    xb = xd.float().cpu().numpy()
    td = cuda.from_numpy(temps).cuda()
    am, smp, ent, probs = ddsv.sample_row_stats(xd, td, cl, 77, cuda.bfloat16)
    r_am, r_ent, r_probs = ref_row_stats(xb, temps, cl)
    np.testing.assert_array_equal(am.cpu().numpy(), r_am)
    np.testing.assert_allclose(ent.cpu().numpy(), r_ent, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probs.float().cpu().numpy(), r_probs, rtol=2 ** -7, atol=1e-9)
    np.testing.assert_array_equal(smp[cl:2 * cl].cpu().numpy(), r_am[cl:2 * cl])
    # captured after the eager call above, replayed: the same draws (same seed)
    g = cuda.cuda.CUDAGraph()
    with cuda.cuda.graph(g):
        out = ddsv.sample_row_stats(xd, td, cl, 77, cuda.bfloat16)
    g.replay()
    cuda.cuda.synchronize()
    assert cuda.equal(out[1], smp) and cuda.equal(out[0], am) and cuda.equal(out[2], ent)

    case = stash_case(rng, False, True)
    (x, cl, src, slots, keep, valid, temps, num_topk, nids, tids, width, lm, S, W) = case
    d = lambda a: cuda.from_numpy(np.ascontiguousarray(a)).cuda()  # noqa: E731
    out_ids = cuda.full((S, W, width + 1), -7, dtype=cuda.int64, device="cuda")
    out_lp = cuda.full((S, W, width + 1), 99.0, device="cuda")
    out_rk = cuda.full((S, W), -5, dtype=cuda.int64, device="cuda")
    ddsv.stash_converged_logprobs(d(x), cl, d(src), d(slots), d(keep), d(valid), d(temps),
                                  num_topk, d(nids), d(tids), out_ids, out_lp, out_rk, lm)
    r_ids, r_lp, r_rk = ref_stash(x, cl, src, slots, keep, valid, temps, num_topk, nids, tids,
                                  width, lm, S, W, (-7, 99.0, -5))
    np.testing.assert_array_equal(out_ids.cpu().numpy(), r_ids)
    np.testing.assert_array_equal(out_rk.cpu().numpy(), r_rk)
    np.testing.assert_allclose(out_lp.cpu().numpy(), r_lp, rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_cuda_torch_compile_reduce_overhead(cuda, rng):
    """The DiffusionGemma step compiled with mode="reduce-overhead" (CUDA graphs) on CUDA
    tensors: replays equal to the eager step."""
    compiled_step_equals_eager(rng, "cuda", mode="reduce-overhead")
