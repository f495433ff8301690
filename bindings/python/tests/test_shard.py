"""Vocabulary-parallel sampling (dds_shard.h) through the Python binding, CPU backend.

R ranks are simulated in one process on column slices of one numpy logits array; the
all-gather concatenates the ranks' records rank-major. The sharded tokens must equal
Sampler.sample on the full rows and the statistics agree within 1e-6 relative
(docs/vocab_parallel.md §5).
"""

import numpy as np
import pytest

import dds

V = 9000  # 8.8 blocks of 1024: aligned splits for R = 8 still leave a ragged last slice
ROWS = 14
OFFSETS = [0, 3, 3, 9, 14]  # 4 requests, one empty
NREQ = len(OFFSETS) - 1
SEEDS = [11, 22, 33, 44]
STATS = ("logprobs", "confidence", "margin", "entropy")
ALL = ("tokens", "logprobs", "argmax", "confidence", "margin", "entropy", "request_status")

CONFIGS = {
    "plain": dict(),
    "top_k": dict(top_k=40),
    "top_p": dict(top_p=0.9),
    "min_p": dict(min_p=0.05),
    "mixed_arrays": dict(top_k=[0, 5, 64, 9000], top_p=[0.8, 1.0, 0.95, 0.5],
                         min_p=[0.0, 0.1, 0.0, 0.02], temperature=[0.7, 1.3, 1.0, 0.9]),
    "guided": dict(guidance_scale=[1.5, 0.0, 2.0, 0.5], top_p=0.95, top_k=20, min_p=0.01,
                   _uncond=True),
    "guided_stats": dict(guidance_scale=1.2, stats="guided", top_k=10, _uncond=True),
    "greedy": dict(temperature=0.0),
}


def _cuts(R, how, rng):
    if how == "even":  # V / R: not multiples of 1024
        return [i * V // R for i in range(R + 1)]
    if how == "aligned":  # on block boundaries (the last slice takes the ragged tail)
        c = [min(i * 1024, V) for i in range(R)] + [V]
        return c
    inner = sorted(rng.choice(np.arange(1, V), size=R - 1, replace=False).tolist())
    return [0] + inner + [V]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((ROWS, V)) * 3).astype(np.float32)
    u = (rng.standard_normal((ROWS, V)) * 3).astype(np.float32)
    x[2, 100:4000] = -np.inf  # a row with many masked columns
    return x, u


def _assert_same(res, full, where, probs_cols=None):
    mism = np.nonzero(res.tokens != full.tokens)[0]
    assert mism.size == 0, f"{where}: tokens differ at rows {mism[:10]}"
    np.testing.assert_array_equal(res.argmax, full.argmax, err_msg=f"{where}: argmax")
    np.testing.assert_array_equal(res.request_status, full.request_status,
                                  err_msg=f"{where}: request_status")
    for key in STATS:
        a = np.asarray(getattr(res, key), np.float64)
        b = np.asarray(getattr(full, key), np.float64)
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12, err_msg=f"{where}: {key}")
    if probs_cols is not None:
        np.testing.assert_allclose(np.asarray(res.probs, np.float64),
                                   np.asarray(full.probs[:, probs_cols], np.float64),
                                   rtol=1e-6, atol=1e-12, err_msg=f"{where}: probs")


@pytest.mark.parametrize("R", [1, 2, 3, 8])
@pytest.mark.parametrize("how", ["even", "aligned", "random"])
@pytest.mark.parametrize("cfg", list(CONFIGS))
def test_sharded_equals_sample(data, R, how, cfg):
    x, u = data
    kw = dict(CONFIGS[cfg])
    guided = kw.pop("_uncond", False)
    rng = np.random.default_rng(R * 100 + len(how))
    cuts = _cuts(R, how, rng)
    common = dict(row_offsets=OFFSETS, seed=SEEDS, step=3, banned_token=5, **kw)
    with dds.Sampler(V, max_rows=64) as s:
        full = s.sample(x, uncond_logits=u if guided else None, outputs=ALL + ("probs",),
                        **common)
        slices = [x[:, cuts[i]:cuts[i + 1]] for i in range(R)]
        uncs = [u[:, cuts[i]:cuts[i + 1]] for i in range(R)] if guided else None
        res = dds.sample_sharded(s, slices, uncond_slices=uncs, all_gather=dds.concat_all_gather,
                                 outputs=ALL + ("probs",), **common)
    assert len(res) == R
    for i, r in enumerate(res):
        _assert_same(r, full, f"{cfg} R={R} {how} rank {i}", slice(cuts[i], cuts[i + 1]))


def _np_concat(out, records):
    """The CPU stand-in for the all-gather: returns the concatenation (copied into `out`)."""
    return np.concatenate(records)


@pytest.mark.parametrize("R", [2, 3])
def test_manual_rounds_ranks_in_any_order(data, R):
    """Driving ShardCall by hand, one sampler per rank, the slices in reverse column order across
    ranks (rank 0 holds the last columns), bf16 logits as raw bits."""
    x, _ = data
    from conftest import bf16_bits

    xb = bf16_bits(x)
    cuts = [i * V // R for i in range(R + 1)]
    order = list(reversed(range(R)))  # rank i holds column slice order[i]
    kw = dict(row_offsets=OFFSETS, seed=SEEDS, top_p=0.9, top_k=30, dtype="bfloat16",
              outputs=ALL)
    samplers = [dds.Sampler(V, max_rows=64) for _ in range(R)]
    try:
        full = samplers[0].sample(xb, **kw)
        calls = [samplers[i].shard_call(xb[:, cuts[order[i]]:cuts[order[i] + 1]], rank=i,
                                        world_size=R, vocab_offset=cuts[order[i]], **kw)
                 for i in range(R)]
        plan = calls[0].plan
        assert all(c.plan == plan for c in calls)
        assert plan.num_rounds == 6 and plan.round_kind[0] == "stats"
        assert plan.round_kind[-1] == "kept" and plan.world_size == R
        assert plan.gathered_bytes == sum(R * n for n in plan.record_bytes)
        for q in range(plan.num_rounds):
            assert calls[0].record_bytes(q) == plan.record_bytes[q]
        gathered = [c.new_gathered() for c in calls]  # one per rank, as on real ranks
        records = [c.new_record() for c in calls]
        for q in range(plan.num_rounds):
            recs = [c.partial(g, rec, q) for c, g, rec in zip(calls, gathered, records)]
            assert all(r.nbytes == plan.record_bytes[q] for r in recs)
            for g in gathered:
                g[plan.gathered_slice(q)] = np.concatenate(recs)
        for c, g in zip(calls, gathered):
            _assert_same(c.finish(g), full, f"manual R={R} rank {c.rank}")
    finally:
        for s in samplers:
            s.close()


def test_one_rank_per_process_form(data):
    """sample_sharded(sampler, one slice, rank=, world_size=, vocab_offset=): what each
    torch.distributed rank calls; here the all-gather of rank 1 is faked from rank 0's records
    computed beforehand (the records do not depend on the order the ranks run in)."""
    x, _ = data
    cut = 4096
    kw = dict(row_offsets=OFFSETS, seed=SEEDS, min_p=0.05, outputs=ALL)
    with dds.Sampler(V, max_rows=64) as s:
        full = s.sample(x, **kw)
        other = s.shard_call(x[:, :cut], rank=0, world_size=2, vocab_offset=0, **kw)
        g0 = other.new_gathered()
        rec0 = other.new_record()
        mine_records = []

        def gather(out, records):
            assert len(records) == 1
            q = len(mine_records)
            mine_records.append(records[0].copy())
            r0 = other.partial(g0, rec0, q).copy()
            n = r0.nbytes
            out[:n] = r0
            out[n:] = records[0]
            g0[other.plan.gathered_slice(q)] = out  # rank 0 sees the same bytes

        r1 = dds.sample_sharded(s, x[:, cut:], rank=1, world_size=2, vocab_offset=cut,
                                all_gather=gather, **kw)
        _assert_same(r1, full, "rank 1")
        _assert_same(other.finish(g0), full, "rank 0")


def test_returning_all_gather_and_one_shot_api(data):
    x, _ = data
    kw = dict(row_offsets=OFFSETS, seed=SEEDS, top_k=7, outputs=("tokens", "entropy"))
    with dds.Sampler(V, max_rows=64) as s:
        full = s.sample(x, **kw)
        res = dds.sample_sharded(s, [x[:, :5000], x[:, 5000:]], all_gather=_np_concat, **kw)
        for r in res:
            np.testing.assert_array_equal(r.tokens, full.tokens)
        # the one-shot methods (arguments rebuilt per call), mirroring the C functions
        parts = [(0, x[:, :5000]), (5000, x[:, 5000:])]
        sk = dict(world_size=2, **kw)
        plan = s.shard_plan(parts[0][1], rank=0, vocab_offset=0, **sk)
        assert plan == s.shard_plan(parts[1][1], rank=1, vocab_offset=5000, **sk)
        gathered = np.zeros(plan.gathered_bytes, np.uint8)
        record = np.zeros(plan.max_record_bytes, np.uint8)
        for q in range(plan.num_rounds):
            recs = [s.sample_partial(sl, gathered, record, round=q, rank=i, vocab_offset=o,
                                     **sk).copy() for i, (o, sl) in enumerate(parts)]
            gathered[plan.gathered_slice(q)] = np.concatenate(recs)
        for i, (o, sl) in enumerate(parts):
            r = s.sample_finish(sl, gathered, rank=i, vocab_offset=o, **sk)
            np.testing.assert_array_equal(r.tokens, full.tokens)
            np.testing.assert_allclose(r.entropy, full.entropy, rtol=1e-6)


def test_plan_rounds_follow_filters(data):
    x, _ = data
    with dds.Sampler(V, max_rows=64) as s:
        sl = x[:, :100]
        kinds = lambda **kw: s.shard_plan(sl, world_size=4, rank=1, vocab_offset=0,  # noqa
                                          **kw).round_kind
        assert kinds() == ("stats",)
        assert kinds(top_k=5) == ("stats", "kept")
        assert kinds(min_p=0.1) == ("stats", "kept")
        assert kinds(top_p=0.5) == ("stats",) + ("radix",) * 4 + ("kept",)
        p0 = s.shard_plan(sl, world_size=4, top_k=5, max_top_k=0)
        p64 = s.shard_plan(sl, world_size=4, top_k=5, max_top_k=64)
        assert p64.row_bytes[0] == p0.row_bytes[0] + 8 * 64
        assert p0.row_bytes[0] == 216


def test_empty_batch():
    with dds.Sampler(64) as s:
        x = np.zeros((0, 32), np.float32)
        res = dds.sample_sharded(s, [x, np.zeros((0, 32), np.float32)])
        assert all(r.tokens.shape == (0,) for r in res)


# ---- bad arguments: each raises naming the argument ------------------------------------------
@pytest.fixture
def small():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 2000)).astype(np.float32)
    with dds.Sampler(2000, max_rows=8) as s:
        yield s, x


@pytest.mark.parametrize("kw, exc, word", [
    (dict(rank=2, world_size=2), ValueError, "rank"),
    (dict(rank=-1, world_size=2), ValueError, "rank"),
    (dict(world_size=0), ValueError, "world_size"),
    (dict(world_size=65), ValueError, "world_size"),
    (dict(world_size=2, vocab_offset=1500), ValueError, "logits"),
    (dict(world_size=2, vocab_offset=-1), ValueError, "vocab_offset"),
    (dict(world_size=2, max_top_k=1025), ValueError, "max_top_k"),
    (dict(world_size=2, max_top_k=1.5), TypeError, "max_top_k"),
    (dict(world_size=2, rank="0"), TypeError, "rank"),
    (dict(world_size=2, top_p=0.5, temperature=-1.0), dds.Error, "temperature"),
    (dict(world_size=2, top_k=100), dds.Error, "top_k"),  # above max_top_k = 64
    (dict(world_size=2, top_k=[1, 100, 0, 0]), dds.Error, "top_ks"),
    (dict(world_size=2, outputs=("nope",)), ValueError, "outputs"),
    (dict(world_size=2, uncond_logits=np.zeros((4, 7), np.float32)), ValueError,
     "uncond_logits"),
], ids=lambda v: str(v) if isinstance(v, str) else None)
def test_bad_shard_arguments(small, kw, exc, word):
    s, x = small
    with pytest.raises(exc, match=word):
        c = s.shard_call(x[:, :1000], **kw)
        g, rec = c.new_gathered(), c.new_record()
        c.partial(g, rec, 0)


def test_bad_buffers(small):
    s, x = small
    c = s.shard_call(x[:, :1000], world_size=2, top_p=0.5)
    n0 = c.plan.record_bytes[0]
    g, rec = c.new_gathered(), c.new_record()
    with pytest.raises(ValueError, match="record_out"):
        c.partial(g, rec[:n0 - 1], 0)
    with pytest.raises(TypeError, match="record_out"):
        c.partial(g, np.zeros(n0, np.float32), 0)
    with pytest.raises(ValueError, match="record_out.*aligned"):
        c.partial(g, rec[1:], 0)
    with pytest.raises(TypeError, match="record_out"):
        c.partial(g, bytearray(n0), 0)
    with pytest.raises(ValueError, match="gathered"):
        c.partial(None, rec, 1)
    with pytest.raises(ValueError, match="gathered"):
        c.partial(g[:10], rec, 2)
    with pytest.raises(ValueError, match="round"):
        c.partial(g, rec, 6)
    with pytest.raises(ValueError, match="gathered"):
        c.finish(g[:-8])
    # zeros are not records: the library rejects them, naming gathered
    with pytest.raises(dds.ArgumentError, match="gathered"):
        c.finish(np.zeros(c.plan.gathered_bytes, np.uint8))


def test_slices_must_partition(small):
    s, x = small
    # both ranks claim columns [0, 1000): checked before anything runs ...
    with pytest.raises(ValueError, match="vocab_offsets"):
        dds.sample_sharded(s, [x[:, :1000], x[:, :1000]], vocab_offsets=[0, 0])
    with pytest.raises(ValueError, match="slices"):
        dds.sample_sharded(s, [x[:, :1000], x[:, 1000:1500]])
    # ... and by the library's finish when the ranks are driven by hand
    calls = [s.shard_call(x[:, :1000], rank=i, world_size=2) for i in range(2)]
    g = calls[0].new_gathered()
    recs = [c.partial(g, c.new_record(), 0) for c in calls]
    g[calls[0].plan.gathered_slice(0)] = np.concatenate(recs)
    with pytest.raises(dds.ArgumentError, match="partition"):
        calls[1].finish(g)
    with pytest.raises(ValueError, match="vocab_offsets"):
        dds.sample_sharded(s, [x[:, :1000], x[:, 1000:]], vocab_offsets=[0])
    with pytest.raises(TypeError, match="all_gather"):
        dds.sample_sharded(s, [x[:, :1000], x[:, 1000:]], all_gather=3)
    with pytest.raises(ValueError, match="world_size"):
        dds.sample_sharded(s, [x[:, :1000], x[:, 1000:]], world_size=3)
    with pytest.raises(ValueError, match="rank"):
        dds.sample_sharded(s, x[:, 1000:], world_size=2, vocab_offset=1000)
    with pytest.raises(ValueError, match="samplers"):
        dds.sample_sharded([s], [x[:, :1000], x[:, 1000:]])
    with pytest.raises(ValueError, match="uncond_slices"):
        dds.sample_sharded(s, [x[:, :1000], x[:, 1000:]], uncond_slices=[x])

    def short(out, records):
        return np.concatenate(records[:1])

    with pytest.raises(ValueError):
        dds.sample_sharded(s, [x[:, :1000], x[:, 1000:]], all_gather=short)


def test_raw_module_errors(small):
    """dds._dds: the shard structs hold their defaults, non-OK statuses raise with
    dds_last_error()."""
    s, x = small
    sh = dds._dds.dds_shard_args()
    assert sh.struct_size == dds._dds.dds_py_sizeof_shard_args()
    assert (sh.world_size, sh.vocab_offset, sh.vocab_slice, sh.max_top_k, sh.round) == (
        1, 0, 0, 64, 0)
    plan = dds._dds.dds_shard_plan()
    assert plan.struct_size == dds._dds.dds_py_sizeof_shard_plan()
    assert len(plan.record_bytes) == dds._dds.DDS_SHARD_MAX_ROUNDS
    c = s.shard_call(x[:, :1000], world_size=2, top_k=3)
    h = s._live()
    dds._dds.dds_sample_shard_plan(h, c.args, c.shard, plan)
    assert plan.num_rounds == 2 and plan.gathered_bytes == c.plan.gathered_bytes
    bad = dds._dds.dds_shard_args()
    bad.world_size, bad.rank, bad.vocab_slice = 2, 5, 1000
    with pytest.raises(dds.ArgumentError, match=r"shard->rank") as e:
        dds._dds.dds_sample_shard_plan(h, c.args, bad, plan)
    assert e.value.status_name == "DDS_ERR_INVALID_ARGUMENT"
    rec = c.new_record()
    with pytest.raises(dds.Error, match="record_out"):
        dds._dds.dds_sample_partial(h, c.args, c.shard, None, None, 0)
    with pytest.raises(dds.Error, match="gathered"):
        dds._dds.dds_sample_finish(h, c.args, c.shard, None, 0)
    assert dds._dds.dds_sample_record_bytes(h, c.args, c.shard, 0) == c.plan.record_bytes[0]
    with pytest.raises(dds.ArgumentError, match="round"):
        dds._dds.dds_sample_record_bytes(h, c.args, c.shard, 7)
    del rec


def test_closed_sampler(small):
    s, x = small
    c = s.shard_call(x[:, :1000], world_size=2)
    s.close()
    with pytest.raises(dds.Error, match="closed"):
        c.partial(c.new_gathered(), c.new_record(), 0)
    with pytest.raises(dds.Error, match="closed"):
        s.shard_call(x[:, :1000], world_size=2)
