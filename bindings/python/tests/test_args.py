"""Bad arguments: TypeError / ValueError / dds.Error naming the argument, before anything runs."""

import numpy as np
import pytest

import dds

V = 16


@pytest.fixture
def s():
    with dds.Sampler(vocab_size=V, max_rows=8, max_requests=4, max_stash_width=4) as smp:
        yield smp


@pytest.fixture
def x():
    return np.zeros((4, V), np.float32)


@pytest.mark.parametrize("kwargs,exc,name", [
    (dict(vocab_size=0), ValueError, "vocab_size"),
    (dict(vocab_size=1.5), TypeError, "vocab_size"),
    (dict(vocab_size=8, backend="gpu"), ValueError, "backend"),
    (dict(vocab_size=8, max_rows=0), ValueError, "max_rows"),
    (dict(vocab_size=8, max_stash_width=2000), ValueError, "max_stash_width"),
    (dict(vocab_size=8, device=-1), ValueError, "device"),
    (dict(vocab_size=8, num_threads=-1), ValueError, "num_threads"),
    (dict(vocab_size=8, num_threads=300), ValueError, "num_threads"),
])
def test_bad_config(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        dds.Sampler(**kwargs)


def test_num_threads_same_tokens():
    # CPU backend: rows shared by threads give the same outputs as one thread.
    rng = np.random.default_rng(7)
    logits = (3 * rng.standard_normal((48, 3000))).astype(np.float32)
    out = []
    for n in (1, 2, 0):
        with dds.Sampler(vocab_size=3000, max_rows=48, num_threads=n) as s:
            r = s.sample(logits, temperature=0.8, seed=5, outputs=("tokens", "entropy"))
            out.append((r.tokens.copy(), r.entropy.copy()))
    for tokens, entropy in out[1:]:
        assert np.array_equal(tokens, out[0][0])
        assert np.array_equal(entropy.view(np.uint32), out[0][1].view(np.uint32))


def test_raw_module_errors_carry_last_error():
    cfg = dds._dds.dds_sampler_config()
    cfg.vocab_size = -3
    with pytest.raises(dds.ArgumentError) as ei:
        dds._dds.dds_create(cfg)
    e = ei.value
    assert isinstance(e, dds.Error) and isinstance(e, ValueError)
    assert e.status == dds._dds.DDS_ERR_INVALID_ARGUMENT
    assert e.status_name == "DDS_ERR_INVALID_ARGUMENT"
    assert "config->vocab_size (-3)" in str(e)
    with pytest.raises(TypeError):
        a = dds._dds.dds_sample_args()
        a.logits = "not an address"


def test_cuda_backend_without_device():
    try:
        import torch  # noqa: F401

        if torch.cuda.is_available():
            pytest.skip("a CUDA device is present")
    except ImportError:
        pass
    with pytest.raises(dds.Error) as ei:
        dds.Sampler(vocab_size=8, backend="cuda")
    assert ei.value.status_name in ("DDS_ERR_NO_DEVICE", "DDS_ERR_UNSUPPORTED", "DDS_ERR_CUDA")


@pytest.mark.parametrize("make,kw,exc,name", [
    (lambda x: x.tolist(), {}, TypeError, "logits"),
    (lambda x: x[0], {}, ValueError, "logits"),
    (lambda x: np.zeros((4, V + 1), np.float32), {}, ValueError, "logits"),
    (lambda x: np.zeros((V, 4), np.float32).T, {}, ValueError, "logits"),
    (lambda x: x.astype(np.float64), {}, TypeError, "logits"),
    (lambda x: x.view(np.uint32).astype(np.uint16), {}, TypeError, "logits"),
    (lambda x: x, dict(dtype="bfloat16"), TypeError, "logits"),
    (lambda x: x, dict(dtype="int8"), TypeError, "dtype"),
    (lambda x: np.zeros((9, V), np.float32), {}, ValueError, "max_rows"),
    (lambda x: x, dict(row_offsets=[0, 2, 3]), ValueError, "row_offsets"),
    (lambda x: x, dict(row_offsets=[1, 4]), ValueError, "row_offsets"),
    (lambda x: x, dict(row_offsets=[0, 3, 2, 4]), ValueError, "row_offsets"),
    (lambda x: x, dict(row_offsets=[0, 1, 2, 3, 4, 4]), ValueError, "max_requests"),
    (lambda x: x, dict(positions=[0, 1]), ValueError, "positions"),
    (lambda x: x, dict(temperature=[1.0, 2.0]), ValueError, "temperature"),
    (lambda x: x, dict(temperature="hot"), TypeError, "temperature"),
    (lambda x: x, dict(temperature=np.ones((2, 2), np.float32)), ValueError, "temperature"),
    (lambda x: x, dict(top_k=2.5), TypeError, "top_k"),
    (lambda x: x, dict(top_k=[1.0, 2.0, 3.0, 4.0]), TypeError, "top_k"),
    (lambda x: x, dict(seed=-1), ValueError, "seed"),
    (lambda x: x, dict(seed=2 ** 64), ValueError, "seed"),
    (lambda x: x, dict(seed=[1, 2, 3, -4]), ValueError, "seed"),
    (lambda x: x, dict(step=2 ** 32), ValueError, "step"),
    (lambda x: x, dict(banned_token=V), ValueError, "banned_token"),
    (lambda x: x, dict(stats="fancy"), ValueError, "stats"),
    (lambda x: x, dict(outputs=("tokens", "nope")), ValueError, "outputs"),
    (lambda x: x, dict(outputs=()), ValueError, "outputs"),
    (lambda x: x, dict(outputs=("request_status",)), ValueError, "outputs"),
    (lambda x: x, dict(out_tokens=np.zeros(4, np.int64)), TypeError, "out_tokens"),
    (lambda x: x, dict(out_tokens=np.zeros(3, np.int32)), ValueError, "out_tokens"),
    (lambda x: x, dict(out_logprobs=np.zeros(8, np.float32)[::2]), ValueError, "out_logprobs"),
    (lambda x: x, dict(out_probs=np.zeros((4, V), np.float64)), TypeError, "out_probs"),
    (lambda x: x, dict(out_probs=np.zeros((4, V), np.uint16)), TypeError, "out_probs"),
    (lambda x: x, dict(out_probs=np.zeros((3, V), np.float32)), ValueError, "out_probs"),
    (lambda x: x, dict(probs_dtype="int4", outputs=("probs",)), TypeError, "dtype"),
    (lambda x: x, dict(uncond_logits=np.zeros((2, V), np.float32)), ValueError,
     "uncond_logits"),
    (lambda x: x, dict(uncond_logits=np.zeros((4, V), np.float16)), TypeError,
     "uncond_logits"),
    (lambda x: x, dict(uncond_row_offsets=[0, 0, 0, 0]), ValueError, "uncond_row_offsets"),
    (lambda x: x, dict(stream=0), ValueError, "stream"),
])
def test_bad_sample_arguments(s, x, make, kw, exc, name):
    with pytest.raises(exc, match=name):
        s.sample(make(x), **kw)


@pytest.mark.parametrize("kw,name", [
    (dict(temperature=float("nan")), "temperature"),
    (dict(temperature=-1.0), "temperature"),
    (dict(top_p=float("nan")), "top_p"),
    (dict(min_p=-0.5), "min_p"),
    (dict(guidance_scale=float("inf")), "guidance_scale"),
    (dict(top_k=-1), "top_k"),
])
def test_bad_scalars_rejected_by_the_library(s, x, kw, name):
    """Scalar fields are checked by libdds: dds.ArgumentError (a ValueError) naming args->X."""
    with pytest.raises(dds.ArgumentError, match=f"args->{name}"):
        s.sample(x, **kw)


def test_readonly_output_rejected(s, x):
    out = np.zeros(4, np.int32)
    out.setflags(write=False)
    with pytest.raises(ValueError, match="out_tokens"):
        s.sample(x, out_tokens=out)


def test_debug_mode_checks_arrays_on_host(x):
    with dds.Sampler(vocab_size=V, debug=True) as s:
        with pytest.raises(dds.ArgumentError, match="temperatures"):
            s.sample(x, temperature=[1.0, np.nan, 1.0, 1.0])
    with dds.Sampler(vocab_size=V) as s:  # without debug: sanitised and flagged
        r = s.sample(x, temperature=[1.0, np.nan, 1.0, 1.0], outputs=("tokens", "request_status"))
        assert r.request_status[1] & dds.REQ_BAD_TEMPERATURE


@pytest.mark.parametrize("kw,exc,name", [
    (dict(num_top=5), ValueError, "num_top"),
    (dict(keep=[1, 0]), ValueError, "keep"),
    (dict(slots=[0.5, 1, 2, 3]), TypeError, "slots"),
    (dict(num_token_ids=[1, 1, 1, 1]), ValueError, "num_token_ids"),
    (dict(token_ids=np.zeros((3, 2), np.int32)), ValueError, "token_ids"),
    (dict(logits_mode="probs"), ValueError, "logits_mode"),
    (dict(num_slots=0), ValueError, "num_slots"),
    (dict(outputs=("request_status",)), ValueError, "outputs"),
    (dict(out_ranks=np.zeros((4, 1, 3), np.int32)), ValueError, "out_ranks"),
    (dict(out_logprobs=np.zeros(4 * 5, np.float64)), TypeError, "out_logprobs"),
    (dict(committed_tokens=[1, 2]), ValueError, "committed_tokens"),
])
def test_bad_stash_arguments(s, x, kw, exc, name):
    with pytest.raises(exc, match=name):
        s.stash_logprobs(x, **kw)


def test_one_sample_signature():
    """sample()'s keyword list lives in its signature only: the shard path fills its defaults
    from it, and an unknown keyword is a TypeError naming it."""
    import inspect

    from dds._sampler import SAMPLE_DEFAULTS, sample_keywords

    sig = [(p.name, p.default) for p in inspect.signature(dds.Sampler.sample).parameters.values()
           if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert list(SAMPLE_DEFAULTS.items()) == sig
    assert len(sig) >= 25
    assert sample_keywords({"temperature": 0.5})["temperature"] == 0.5
    with pytest.raises(TypeError, match="temprature"):
        sample_keywords({"temprature": 0.5})
    with dds.Sampler(vocab_size=V) as s:
        with pytest.raises(TypeError, match="temprature"):
            s.shard_call(np.zeros((2, V), np.float32), temprature=0.5)


def test_sample_reuses_its_args_struct():
    """Values of one call do not leak into the next (the reused struct is reset per call)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, V)).astype(np.float32)
    with dds.Sampler(vocab_size=V) as s, dds.Sampler(vocab_size=V) as fresh:
        s.sample(x, temperature=[0.0, 0.5, 2.0, 0.0], top_k=3, top_p=0.5, min_p=0.2, seed=9,
                 step=4, banned_token=2, stats="guided", positions=[3, 2, 1, 0],
                 outputs=("tokens", "probs", "entropy"))
        for kw in (dict(seed=5), dict(seed=5, temperature=0.7), dict(seed=[1, 2, 3, 4])):
            a = s.sample(x, outputs=("tokens", "entropy", "logprobs"), **kw)
            b = fresh.sample(x, outputs=("tokens", "entropy", "logprobs"), **kw)
            assert a.probs is None and b.probs is None
            for f in ("tokens", "entropy", "logprobs"):
                np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
