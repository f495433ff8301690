"""dds.Sampler.sample on the CPU backend: the scenarios of the C tests, through Python."""

import math

import numpy as np
import pytest

import dds
import reference as ref
from conftest import bf16_bits, bf16_to_f32

ALL = ("tokens", "logprobs", "argmax", "confidence", "margin", "entropy", "probs",
       "request_status")


def logits(rng, rows, V, sigma=2.0):
    return (sigma * rng.standard_normal((rows, V))).astype(np.float32)


def test_version_matches_library():
    assert dds.__version__ == dds._dds.dds_version_string()
    major, minor, patch = (int(x) for x in dds.__version__.split("."))
    assert dds.version_number == major * 1000000 + minor * 1000 + patch
    from importlib.metadata import PackageNotFoundError, version

    try:
        assert version("dds") == dds.__version__  # the wheel's metadata (pyproject.toml)
    except PackageNotFoundError:
        pass  # running from a source tree, not an installed wheel


def test_result_is_named_and_optional(rng):
    with dds.Sampler(vocab_size=7, max_rows=8) as s:
        r = s.sample(logits(rng, 3, 7), seed=1)
        assert isinstance(r, dds.SampleResult)
        assert r.tokens.dtype == np.int32 and r.tokens.shape == (3,)
        assert r.logprobs is None and r.probs is None
        r = s.sample(logits(rng, 3, 7), seed=1, outputs=ALL)
        assert r.probs.shape == (3, 7) and r.probs.dtype == np.float32
        assert r.request_status.shape == (3,)


@pytest.mark.parametrize("V", [1, 7, 1025, 2500])
def test_tokens_match_reference_plain(rng, V):
    x = logits(rng, 5, V)
    with dds.Sampler(vocab_size=V, max_rows=8) as s:
        offs = [0, 2, 5]
        r = s.sample(x, row_offsets=offs, seed=[11, 2 ** 63 + 5], step=[3, 4])
        expect = ref.sample(x, offs, seed=[11, 2 ** 63 + 5], step=[3, 4])
        np.testing.assert_array_equal(r.tokens, expect)


def test_filters_mixed_per_request(rng):
    V = 300
    x = logits(rng, 12, V, sigma=3.0)
    offs = [0, 3, 6, 9, 12]
    kw = dict(temperature=[1.0, 0.7, 1.3, 0.9], top_k=[0, 5, 50, 1], top_p=[0.9, 1.0, 0.5, 1.0],
              min_p=[0.0, 0.1, 0.0, 0.05], seed=[1, 2, 3, 4], step=7)
    with dds.Sampler(vocab_size=V, max_rows=16) as s:
        r = s.sample(x, row_offsets=offs, outputs=ALL, **kw)
    np.testing.assert_array_equal(r.tokens, ref.sample(x, offs, **kw))
    # top_k = 1: the argmax
    np.testing.assert_array_equal(r.tokens[9:12], r.argmax[9:12])
    # the processed distribution has at most k tokens, and the token is in it
    support = (r.probs > 0).sum(axis=1)
    assert np.all(support[3:6] <= 5)
    assert np.all(r.probs[np.arange(12), r.tokens] > 0)
    np.testing.assert_allclose(r.probs.sum(axis=1), 1.0, rtol=1e-5)


def test_filters_exact_support(rng):
    """The kept set of each filter equals the spec's (via the processed probs)."""
    V = 64
    x = logits(rng, 1, V, sigma=2.0)
    with dds.Sampler(vocab_size=V) as s:
        for kw in (dict(top_k=10), dict(top_p=0.6), dict(min_p=0.2),
                   dict(top_k=20, top_p=0.8, min_p=0.05, temperature=0.5)):
            r = s.sample(x, outputs=("tokens", "probs"), seed=5, **kw)
            _, _, dist = ref.sample_row(x[0], seed=5, **kw)
            assert set(np.nonzero(r.probs[0])[0].tolist()) == set(dist)
            for t, p in dist.items():
                assert r.probs[0, t] == pytest.approx(p, rel=1e-5)


def test_scalar_and_array_parameters_agree(rng):
    V = 50
    x = logits(rng, 6, V)
    offs = [0, 2, 4, 6]
    with dds.Sampler(vocab_size=V) as s:
        a = s.sample(x, row_offsets=offs, temperature=0.8, top_k=7, top_p=0.9, min_p=0.01,
                     seed=42, step=3)
        b = s.sample(x, row_offsets=np.array(offs, np.int32),
                     temperature=np.full(3, 0.8, np.float32), top_k=np.full(3, 7, np.int32),
                     top_p=[0.9] * 3, min_p=(0.01, 0.01, 0.01),
                     seed=np.full(3, 42, np.uint64), step=np.full(3, 3, np.uint32))
        np.testing.assert_array_equal(a.tokens, b.tokens)


def test_greedy(rng):
    V = 2100
    x = logits(rng, 4, V)
    x[1, 5] = x[1, 2000] = 50.0  # a tie: the lower id wins
    with dds.Sampler(vocab_size=V) as s:
        r = s.sample(x, temperature=0.0, outputs=ALL, seed=[1, 2, 3, 4])
    np.testing.assert_array_equal(r.tokens, np.argmax(x, axis=1))
    assert r.tokens[1] == 5
    np.testing.assert_array_equal(r.tokens, r.argmax)
    np.testing.assert_array_equal(r.logprobs, 0.0)
    np.testing.assert_array_equal(r.confidence, 1.0)
    np.testing.assert_array_equal(r.entropy, 0.0)
    assert np.all(r.probs.sum(axis=1) == 1.0)


def test_guided_stats_describe_guided_distribution(rng):
    V = 40
    x = logits(rng, 3, V)
    with dds.Sampler(vocab_size=V) as s:
        g = s.sample(x, temperature=0.0, stats="guided", outputs=ALL)
        p = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(g.probs, p, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(g.confidence, p.max(axis=1), rtol=1e-5)
        ps = np.sort(p, axis=1)
        np.testing.assert_allclose(g.margin, ps[:, -1] - ps[:, -2], rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(g.entropy, -(p * np.log(p)).sum(axis=1), rtol=1e-5)
        np.testing.assert_allclose(g.logprobs, np.log(p[np.arange(3), g.tokens]), rtol=1e-5)
        # processed with temperature 0.5: the statistics change, the argmax does not
        q = s.sample(x, temperature=0.5, stats="processed", outputs=ALL, seed=9)
        np.testing.assert_array_equal(q.argmax, g.argmax)
        assert np.all(q.confidence > g.confidence)
        np.testing.assert_allclose(q.logprobs, np.log(q.probs[np.arange(3), q.tokens]),
                                   rtol=1e-5)


def test_guidance_mixed_batch(rng):
    """Three requests: guided, not guided (-1), guided with another scale; uncond rows only for
    the guided ones, in another order."""
    V = 120
    offs = [0, 2, 5, 7]
    c = logits(rng, 7, V)
    u = logits(rng, 4, V)
    uoffs = [2, -1, 0]  # request 0 uses uncond rows 2..3, request 2 rows 0..1
    g = [1.5, 3.0, 0.5]
    with dds.Sampler(vocab_size=V) as s:
        r = s.sample(c, row_offsets=offs, uncond_logits=u, uncond_row_offsets=uoffs,
                     guidance_scale=g, seed=[5, 6, 7], outputs=ALL)
        assert np.all(r.request_status == 0)
        expect = []
        for req, (lo, hi) in enumerate(zip(offs[:-1], offs[1:])):
            for j, i in enumerate(range(lo, hi)):
                urow = u[uoffs[req] + j] if uoffs[req] >= 0 else None
                expect.append(ref.sample_row(c[i], u=urow, g=g[req], seed=5 + req, pos=j)[0])
        np.testing.assert_array_equal(r.tokens, expect)
        # guidance 0 for every request = no guidance
        a = s.sample(c, row_offsets=offs, uncond_logits=u, uncond_row_offsets=uoffs,
                     guidance_scale=0.0, seed=[5, 6, 7])
        b = s.sample(c, row_offsets=offs, seed=[5, 6, 7])
        np.testing.assert_array_equal(a.tokens, b.tokens)
        # uncond rows out of range: the request is not guided and is flagged
        bad = s.sample(c, row_offsets=offs, uncond_logits=u, uncond_row_offsets=[3, -1, 0],
                       guidance_scale=g, seed=[5, 6, 7], outputs=("tokens", "request_status"))
        assert bad.request_status[0] & dds.REQ_BAD_UNCOND_ROWS
        assert bad.request_status[1] == 0 and bad.request_status[2] == 0


def test_guidance_mirrored_layout(rng):
    """uncond_row_offsets=None: the uncond tensor mirrors the logits rows."""
    V = 30
    c, u = logits(rng, 4, V), logits(rng, 4, V)
    with dds.Sampler(vocab_size=V) as s:
        r = s.sample(c, uncond_logits=u, guidance_scale=2.0, seed=[1, 2, 3, 4])
    expect = [ref.sample_row(c[i], u=u[i], g=2.0, seed=i + 1)[0] for i in range(4)]
    np.testing.assert_array_equal(r.tokens, expect)


def test_banned_token_and_neg_inf(rng):
    V = 10
    x = np.zeros((2000, V), np.float32)
    x[:, 3] = -np.inf
    with dds.Sampler(vocab_size=V, max_rows=2000) as s:
        r = s.sample(x, row_offsets=[0, 2000], banned_token=7, seed=3, outputs=ALL)
    assert not np.any(r.tokens == 7) and not np.any(r.tokens == 3)
    assert len(set(r.tokens.tolist())) == 8
    np.testing.assert_allclose(r.probs[:, [3, 7]], 0.0)
    np.testing.assert_allclose(r.entropy, math.log(8), rtol=1e-6)


def test_request_status_flags_and_empty_row():
    V = 5
    x = np.zeros((3, V), np.float32)
    x[2, :] = -np.inf
    with dds.Sampler(vocab_size=V) as s:
        r = s.sample(x, temperature=[np.nan, 1.0, 1.0], top_k=[0, -3, 0],
                     outputs=("tokens", "request_status", "logprobs"))
    assert r.request_status[0] & dds.REQ_BAD_TEMPERATURE
    assert r.request_status[1] & dds.REQ_BAD_TOP_K
    assert r.request_status[2] & dds.REQ_EMPTY_ROW
    assert r.tokens[2] == 0 and r.logprobs[2] == -np.inf


def test_batch_invariance_and_positions(rng):
    """A request samples the same tokens alone or in a batch, and packing only some rows of a
    canvas (with their positions) does not change their draws."""
    V = 80
    canvas = logits(rng, 10, V)
    with dds.Sampler(vocab_size=V) as s:
        alone = s.sample(canvas, row_offsets=[0, 10], seed=77, step=2).tokens
        other = logits(rng, 5, V)
        batch = s.sample(np.concatenate([other, canvas]), row_offsets=[0, 5, 15],
                         seed=[1, 77], step=[9, 2]).tokens
        np.testing.assert_array_equal(batch[5:], alone)
        masked = np.array([1, 4, 5, 9], np.int32)
        packed = s.sample(canvas[masked], row_offsets=[0, 4], positions=masked, seed=77,
                          step=2).tokens
        np.testing.assert_array_equal(packed, alone[masked])


def test_strided_logits_and_outputs(rng):
    V = 33
    big = logits(rng, 6, 50)
    view = big[:, 5:5 + V]  # row stride 50, unit column stride
    probs_buf = np.full((6, 40), -1.0, np.float32)
    with dds.Sampler(vocab_size=V) as s:
        a = s.sample(view, seed=[1, 2, 3, 4, 5, 6], outputs=ALL)
        out_tok = np.full(6, -5, np.int32)
        b = s.sample(np.ascontiguousarray(view), seed=[1, 2, 3, 4, 5, 6],
                     out_tokens=out_tok, out_probs=probs_buf[:, :V])
    assert b.tokens is out_tok
    np.testing.assert_array_equal(a.tokens, out_tok)
    np.testing.assert_array_equal(a.probs, probs_buf[:, :V])
    assert np.all(probs_buf[:, V:] == -1.0)  # nothing written past the row


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_logits(rng, dtype):
    V = 1500
    x32 = logits(rng, 3, V)
    if dtype == "float16":
        xh = x32.astype(np.float16)
        exact = xh.astype(np.float32)
        kw = {}
    else:
        xh = bf16_bits(x32)
        exact = bf16_to_f32(xh)
        kw = {"dtype": "bfloat16"}
    with dds.Sampler(vocab_size=V) as s:
        a = s.sample(xh, seed=[4, 5, 6], top_p=0.9, outputs=("tokens", "entropy"), **kw)
        b = s.sample(exact, seed=[4, 5, 6], top_p=0.9, outputs=("tokens", "entropy"))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.entropy, b.entropy)


def test_bf16_via_ml_dtypes(rng):
    ml = pytest.importorskip("ml_dtypes", reason="ml_dtypes not installed (optional)")
    V = 20
    x = logits(rng, 2, V)
    with dds.Sampler(vocab_size=V) as s:
        a = s.sample(x.astype(ml.bfloat16), seed=3, outputs=("tokens", "probs"),
                     probs_dtype="bfloat16")
        b = s.sample(bf16_bits(x), dtype="bf16", seed=3, outputs=("tokens",))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    assert a.probs.dtype == ml.bfloat16


@pytest.mark.parametrize("probs_dtype", ["float32", "float16", "bfloat16"])
def test_probs_dtypes(rng, probs_dtype):
    V = 60
    x = logits(rng, 4, V)
    with dds.Sampler(vocab_size=V) as s:
        ref32 = s.sample(x, seed=1, outputs=("probs",)).probs
        r = s.sample(x, seed=1, outputs=("probs",), probs_dtype=probs_dtype)
        if probs_dtype == "float32":
            np.testing.assert_array_equal(r.probs, ref32)
        elif probs_dtype == "float16":
            assert r.probs.dtype == np.float16
            np.testing.assert_array_equal(r.probs, ref32.astype(np.float16))
        else:
            got = r.probs if r.probs.dtype == np.uint16 else r.probs.view(np.uint16)
            np.testing.assert_array_equal(got, bf16_bits(ref32))
        # a caller-given uint16 buffer needs the dtype named
        if probs_dtype != "float32":
            buf = np.zeros((4, V), np.uint16)
            s.sample(x, seed=1, out_probs=buf, probs_dtype=probs_dtype)
            want = (ref32.astype(np.float16).view(np.uint16) if probs_dtype == "float16"
                    else bf16_bits(ref32))
            np.testing.assert_array_equal(buf, want)


def test_chi_square_filtered_distribution():
    """1e5 draws (one request, 1e5 positions, fixed seed) against the exact filtered
    distribution: deterministic, cannot flake."""
    V, N = 24, 100_000
    row = np.linspace(-2.0, 1.5, V).astype(np.float32)[::-1].copy()
    x = np.broadcast_to(row, (N, V))  # a stride-0 view is not allowed: copy
    x = np.ascontiguousarray(x)
    kw = dict(temperature=0.8, top_k=15, top_p=0.95, min_p=0.02)
    with dds.Sampler(vocab_size=V, max_rows=N) as s:
        r = s.sample(x, row_offsets=[0, N], seed=2024, step=1, **kw)
    _, _, dist = ref.sample_row(row, **kw)
    counts = np.bincount(r.tokens, minlength=V)
    assert set(np.nonzero(counts)[0].tolist()) <= set(dist)
    keys = sorted(dist)
    expected = np.array([dist[t] * N for t in keys])
    observed = counts[keys]
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    df = len(keys) - 1
    # Wilson-Hilferty: critical value at p = 1e-4
    z = 3.719
    crit = df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3
    assert chi2 < crit, (chi2, crit, df)


def test_rare_tail_is_sampled():
    """A token 20 nats below the rest of a 2-token row is drawn at its true rate over 1e5
    independent positions; fp32-uniform Gumbels would never draw it."""
    N = 100_000
    x = np.zeros((N, 2), np.float32)
    x[:, 1] = -9.0  # p = exp(-9)/(1+exp(-9)) = 1.23e-4 -> ~12 expected
    with dds.Sampler(vocab_size=2, max_rows=N) as s:
        t = s.sample(x, row_offsets=[0, N], seed=99).tokens
    expect = N * math.exp(-9.0) / (1 + math.exp(-9.0))
    hits = int((t == 1).sum())
    assert abs(hits - expect) < 5 * math.sqrt(expect) + 1, (hits, expect)


def test_seed_and_step_change_draws(rng):
    V = 1000
    x = np.zeros((64, V), np.float32)
    with dds.Sampler(vocab_size=V) as s:
        a = s.sample(x, row_offsets=[0, 64], seed=1).tokens
        b = s.sample(x, row_offsets=[0, 64], seed=2).tokens
        c = s.sample(x, row_offsets=[0, 64], seed=1, step=1).tokens
        d = s.sample(x, row_offsets=[0, 64], seed=1).tokens
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    np.testing.assert_array_equal(a, d)


def test_empty_call_is_noop():
    with dds.Sampler(vocab_size=4) as s:
        r = s.sample(np.zeros((0, 4), np.float32))
        assert r.tokens.shape == (0,)


def test_gil_released_threads(rng):
    """Two samplers used from two threads at once give the same tokens as one at a time."""
    import threading

    V, N = 512, 400
    x = logits(rng, N, V)
    s1, s2 = dds.Sampler(vocab_size=V, max_rows=N), dds.Sampler(vocab_size=V, max_rows=N)
    want = s1.sample(x, row_offsets=[0, N], seed=8).tokens
    out = {}

    def run(s, key):
        out[key] = [s.sample(x, row_offsets=[0, N], seed=8).tokens for _ in range(5)]

    th = [threading.Thread(target=run, args=(s, k)) for k, s in (("a", s1), ("b", s2))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    for key in "ab":
        for tok in out[key]:
            np.testing.assert_array_equal(tok, want)
    s1.close()
    s2.close()


def test_reference_philox_known_answers():
    """The NumPy reference's Philox4x32-10 reproduces Random123's kat_vectors."""
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF),
              (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, want in cases:
        got = ref.philox4x32_10(*[np.array([c], np.uint64) for c in ctr], *key)
        assert [int(g[0]) for g in got] == list(want)


def test_empty_request_in_the_middle_and_negative_positions(rng):
    V = 64
    x = logits(rng, 5, V)
    pos = np.array([-3, 7, 0, -1, 2**31 - 1], np.int32)
    offs = [0, 2, 2, 5]
    seeds = [3, 99, 5]
    with dds.Sampler(vocab_size=V) as s:
        r = s.sample(x, row_offsets=offs, positions=pos, seed=seeds, top_k=[5, 0, 10],
                     outputs=("tokens", "request_status"))
    expect = [ref.sample_row(x[i], seed=seeds[0 if i < 2 else 2], top_k=5 if i < 2 else 10,
                             pos=int(np.uint32(np.int64(pos[i]) & 0xFFFFFFFF)))[0]
              for i in range(5)]
    np.testing.assert_array_equal(r.tokens, expect)
    np.testing.assert_array_equal(r.request_status, 0)


def test_plus_inf_is_flt_max_and_v1():
    x = np.array([[0.0, np.inf, 1.0, np.nan], [np.inf, np.inf, 0.0, -np.inf]], np.float32)
    with dds.Sampler(vocab_size=4) as s:
        r = s.sample(x, seed=[1, 2], outputs=("tokens", "argmax", "confidence", "probs"))
    assert r.tokens[0] == 1 and r.argmax[1] == 0  # tie between two FLT_MAX: lower id
    assert r.tokens[1] in (0, 1) and r.probs[1, 3] == 0 and r.probs[0, 3] == 0
    with dds.Sampler(vocab_size=1) as s:
        r = s.sample(np.zeros((3, 1), np.float32), outputs=("tokens", "logprobs", "entropy"))
    np.testing.assert_array_equal(r.tokens, 0)
    np.testing.assert_array_equal(r.logprobs, 0)


def test_top_k_boundary_ties_to_lower_id():
    x = np.array([[1.0, 3.0, 2.0, 2.0, 2.0, 0.0]], np.float32)
    with dds.Sampler(vocab_size=6) as s:
        r = s.sample(x, top_k=3, outputs=("probs",))
    assert np.nonzero(r.probs[0])[0].tolist() == [1, 2, 3]
