"""dds.Sampler.stash_logprobs on the CPU backend."""

import numpy as np
import pytest

import dds


def ref_stash_row(row, n, T=1.0, committed=None, ids=None, logits_mode=0):
    """(ids, values, ranks) of one stash row per docs/sampling.md §7."""
    T = 1.0 if T <= 0 else T
    inv = np.float32(np.float32(1.0) / np.float32(T))
    v = (np.asarray(row, np.float32) * inv).astype(np.float32)
    fin = v > -np.inf
    m = v[fin].max()
    logz = np.log(np.exp(v[fin].astype(np.float64) - m).sum())
    val = (v.astype(np.float64) - m) - logz if logits_mode == 0 else v.astype(np.float64)
    order = np.lexsort((np.arange(v.size), -v.astype(np.float64)))
    order = [t for t in order if fin[t]]
    e0 = order[0] if committed is None else committed
    chosen = list(ids) if ids is not None else order[:n]

    def rank(t):
        return 1 + int((v > v[t]).sum())

    out_ids = [e0] + chosen + [0] * (n - len(chosen))
    out_val = [val[e0]] + [val[t] for t in chosen] + [-np.inf] * (n - len(chosen))
    out_rank = [rank(e0)] + [rank(t) for t in chosen] + [0] * (n - len(chosen))
    return np.array(out_ids), np.array(out_val), np.array(out_rank)


def test_stash_topn_default_layout():
    rng = np.random.default_rng(3)
    V, n = 50, 5
    x = rng.standard_normal((6, V)).astype(np.float32)
    offs = [0, 2, 6]
    with dds.Sampler(vocab_size=V, max_stash_width=8) as s:
        r = s.stash_logprobs(x, row_offsets=offs, num_top=n, temperature=0.7)
    assert isinstance(r, dds.StashResult)
    assert r.token_ids.shape == (2, 4, n + 1)  # num_slots = R, rows_per_slot = largest request
    for req, (lo, hi) in enumerate(zip(offs[:-1], offs[1:])):
        for j in range(4):
            if j < hi - lo:
                ids, val, rk = ref_stash_row(x[lo + j], n, T=0.7)
                np.testing.assert_array_equal(r.token_ids[req, j], ids)
                np.testing.assert_allclose(r.logprobs[req, j], val, rtol=1e-6)
                np.testing.assert_array_equal(r.ranks[req, j], rk)
            else:  # not written: the padding the package filled in
                np.testing.assert_array_equal(r.token_ids[req, j], 0)
                assert np.all(r.logprobs[req, j] == -np.inf)


def test_stash_keep_slots_num_valid_committed_poison():
    rng = np.random.default_rng(4)
    V, n = 30, 3
    x = rng.standard_normal((7, V)).astype(np.float32)
    offs = [0, 3, 5, 7]
    shape = (4, 3, n + 1)
    ids = np.full(shape, -7, np.int32)
    lp = np.full(shape, 12345.0, np.float32)
    rk = np.full(shape, -9, np.int32)
    committed = np.arange(7, dtype=np.int32)
    with dds.Sampler(vocab_size=V) as s:
        r = s.stash_logprobs(x, row_offsets=offs, keep=[True, False, True], slots=[3, 0, 1],
                             num_valid=[2, 2, 5], committed_tokens=committed, num_top=n,
                             out_token_ids=ids, out_logprobs=lp, out_ranks=rk,
                             outputs=("request_status",))
    assert r.token_ids is ids and r.ranks is rk
    np.testing.assert_array_equal(r.request_status, 0)
    # request 0 -> slot 3, 2 valid rows; request 2 -> slot 1, 2 rows (clamped to its rows)
    for req, slot, nv in ((0, 3, 2), (2, 1, 2)):
        for j in range(3):
            i = offs[req] + j
            if j < nv:
                e_ids, e_val, e_rk = ref_stash_row(x[i], n, committed=int(committed[i]))
                np.testing.assert_array_equal(ids[slot, j], e_ids)
                np.testing.assert_allclose(lp[slot, j], e_val, rtol=1e-6)
                np.testing.assert_array_equal(rk[slot, j], e_rk)
            else:
                assert np.all(ids[slot, j] == -7) and np.all(lp[slot, j] == 12345.0)
    # slots 0 and 2 untouched (request 1 not kept)
    assert np.all(ids[[0, 2]] == -7) and np.all(rk[[0, 2]] == -9)


def test_stash_own_token_ids_and_logits_mode():
    rng = np.random.default_rng(5)
    V, n = 20, 4
    x = rng.standard_normal((2, V)).astype(np.float32)
    tids = np.array([[3, 7, 1, 0], [5, 5, 19, 2]], np.int32)
    with dds.Sampler(vocab_size=V) as s:
        r = s.stash_logprobs(x, token_ids=tids, num_token_ids=[2, 4], logits_mode="logits",
                             temperature=2.0)
        with pytest.raises(ValueError, match="num_top"):
            s.stash_logprobs(x, token_ids=tids, num_top=3)
    for req, nid in ((0, 2), (1, 4)):
        e_ids, e_val, e_rk = ref_stash_row(x[req], n, T=2.0, ids=tids[req, :nid], logits_mode=1)
        np.testing.assert_array_equal(r.token_ids[req, 0], e_ids)
        np.testing.assert_allclose(r.logprobs[req, 0], e_val, rtol=1e-6)
        np.testing.assert_array_equal(r.ranks[req, 0], e_rk)


def test_stash_bad_slot_flagged():
    x = np.zeros((2, 4), np.float32)
    with dds.Sampler(vocab_size=4) as s:
        r = s.stash_logprobs(x, slots=[0, 5], num_slots=2, num_top=2,
                             outputs=("token_ids", "request_status"))
    assert r.request_status[1] & dds.REQ_BAD_SLOT
    assert r.request_status[0] == 0
    assert r.logprobs is None


def test_stash_bf16_and_capacity():
    from conftest import bf16_bits, bf16_to_f32

    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 40)).astype(np.float32)
    xb = bf16_bits(x)
    with dds.Sampler(vocab_size=40, max_stash_width=4) as s:
        a = s.stash_logprobs(xb, dtype="bfloat16")
        b = s.stash_logprobs(bf16_to_f32(xb))
        assert a.token_ids.shape[-1] == 5  # num_top defaults to min(20, max_stash_width)
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_array_equal(a.logprobs, b.logprobs)
        with pytest.raises(ValueError, match="num_top"):
            s.stash_logprobs(x, num_top=5)
