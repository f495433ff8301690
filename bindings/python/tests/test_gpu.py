"""CUDA backend through torch and CuPy (marker `gpu`; run on the GPU machine by gpu-test.sh).

Each test compares against the CPU backend (the oracle) on the same inputs: identical tokens
(near-ties between block scores excepted and counted, per DESIGN.md §5) and statistics within
1e-5 relative.
"""

import importlib
import os

import numpy as np
import pytest

import dds

pytestmark = pytest.mark.gpu

ALL = ("tokens", "logprobs", "argmax", "confidence", "margin", "entropy", "probs",
       "request_status")
STATS = ("logprobs", "confidence", "margin", "entropy")
REVEAL_ALL = ("reveal", "num_revealed", "finished", "request_status")
VERIFY_ALL = ("accepted_counts", "tokens", "logprobs", "request_status")


# gpu-test.sh sets DDS_REQUIRE_GPU=1 on the GPU machine: there a missing device, torch, CuPy or
# CUDA backend is a failure, not a skip.
_REQUIRE = os.environ.get("DDS_REQUIRE_GPU") == "1"


def _skip(reason):
    if _REQUIRE:
        pytest.fail(f"DDS_REQUIRE_GPU=1 but {reason}")
    pytest.skip(reason)


def _need_cuda_lib():
    if not dds.has_cuda():
        _skip("libdds was built without the CUDA backend (no CUDA toolkit at build time)")


def _import(name, what):
    try:
        return importlib.import_module(name)
    except ImportError:
        _skip(f"{what} is not installed")


@pytest.fixture(scope="module")
def torch():
    t = _import("torch", "torch")
    if not t.cuda.is_available():
        _skip("torch sees no CUDA device")
    _need_cuda_lib()
    return t


@pytest.fixture(scope="module")
def cupy():
    cp = _import("cupy", "CuPy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            _skip("CuPy sees no CUDA device")
    except Exception as e:  # pragma: no cover
        _skip(f"CuPy cannot use CUDA: {e}")
    _need_cuda_lib()
    return cp


def _np(t):
    """torch / CuPy array -> numpy (bf16 torch tensors as float32 values)."""
    if hasattr(t, "detach"):
        t = t.detach()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return t.cpu().numpy()
    if hasattr(t, "get"):
        return t.get()
    return np.asarray(t)


def _host_logits(x):
    """(numpy array, dtype argument) of a torch tensor for the CPU backend, bits unchanged."""
    if str(x.dtype) == "torch.bfloat16":
        import torch

        return x.contiguous().view(torch.int16).cpu().numpy().view(np.uint16), "bfloat16"
    return _np(x.contiguous()), None


def _compare(gpu, cpu, what=STATS, max_token_mismatch=0):
    g_tok, c_tok = _np(gpu.tokens), cpu.tokens
    mism = int((g_tok != c_tok).sum())
    assert mism <= max_token_mismatch, (
        f"{mism} of {len(c_tok)} tokens differ between CUDA and CPU backends; first at "
        f"{np.nonzero(g_tok != c_tok)[0][:10]}")
    if gpu.argmax is not None:
        np.testing.assert_array_equal(_np(gpu.argmax), cpu.argmax)
    same = g_tok == c_tok
    for key in what:
        g, c = getattr(gpu, key), getattr(cpu, key)
        if g is None:
            continue
        g, c = _np(g).astype(np.float64), np.asarray(c, np.float64)
        if key == "logprobs":  # the token's own value: compare where the tokens agree
            g, c = g[same], c[same]
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6, err_msg=key)
    if gpu.request_status is not None:
        np.testing.assert_array_equal(_np(gpu.request_status), cpu.request_status)
    return mism


@pytest.mark.parametrize("V", [7, 1025, 32001, 151936])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_torch_parity_with_cpu(torch, V, dt):
    rows = 257 if V <= 32001 else 16
    g = torch.Generator(device="cuda").manual_seed(V)
    x = (2.0 * torch.randn(rows, V, device="cuda", generator=g)).to(getattr(torch, dt))
    offs = [0, 1, rows // 3, rows]
    kw = dict(seed=[1, 2 ** 40 + 7, 3], step=[0, 5, 9], temperature=[1.0, 0.7, 1.2])
    with dds.Sampler(vocab_size=V, backend="cuda", max_rows=rows) as sg, \
            dds.Sampler(vocab_size=V, max_rows=rows) as sc:
        offs_dev = torch.tensor(offs, dtype=torch.int32, device="cuda")
        rg = sg.sample(x, row_offsets=offs_dev, outputs=ALL[:-2] + ("request_status",), **kw)
        assert rg.tokens.device == x.device and rg.tokens.dtype == torch.int32
        hx, hdt = _host_logits(x)
        rc = sc.sample(hx, dtype=hdt, row_offsets=offs, outputs=ALL[:-2] + ("request_status",),
                       **kw)
        torch.cuda.synchronize()
        _compare(rg, rc, max_token_mismatch=max(1, rows // 200))


def test_torch_filters_guidance_mixed_batch(torch):
    V, rows = 3000, 40
    torch.manual_seed(0)
    c = 3.0 * torch.randn(rows, V, device="cuda")
    u = 3.0 * torch.randn(10, V, device="cuda")
    offs = [0, 10, 20, 30, 40]
    dev = dict(
        guidance_scale=torch.tensor([1.5, 0.0, 2.0, 0.0], device="cuda"),
        temperature=torch.tensor([1.0, 0.0, 0.8, 1.1], device="cuda"),
        top_k=torch.tensor([0, 0, 50, 5], dtype=torch.int32, device="cuda"),
        top_p=torch.tensor([0.9, 1.0, 1.0, 0.5], device="cuda"),
        min_p=torch.tensor([0.0, 0.0, 0.05, 0.0], device="cuda"),
        seed=torch.tensor([5, 6, 7, 8], dtype=torch.int64, device="cuda"),
    )
    host = {k: _np(v) for k, v in dev.items()}
    host["seed"] = host["seed"].astype(np.uint64)
    uoffs = [0, -1, 0, -1]
    with dds.Sampler(vocab_size=V, backend="cuda") as sg, dds.Sampler(vocab_size=V) as sc:
        for stats in ("processed", "guided"):
            rg = sg.sample(c, row_offsets=torch.tensor(offs, dtype=torch.int32, device="cuda"),
                           uncond_logits=u, uncond_row_offsets=uoffs, stats=stats,
                           outputs=ALL[:-2] + ("request_status",), **dev)
            rc = sc.sample(_np(c), row_offsets=offs, uncond_logits=_np(u),
                           uncond_row_offsets=uoffs, stats=stats,
                           outputs=ALL[:-2] + ("request_status",), **host)
            torch.cuda.synchronize()
            _compare(rg, rc, max_token_mismatch=1)
            # greedy request: the argmax
            np.testing.assert_array_equal(_np(rg.tokens)[10:20], _np(rg.argmax)[10:20])


@pytest.mark.parametrize("probs_dtype", ["float32", "bfloat16", "float16"])
def test_torch_probs_output(torch, probs_dtype):
    V, rows = 1100, 8
    x = torch.randn(rows, V, device="cuda")
    with dds.Sampler(vocab_size=V, backend="cuda") as sg, dds.Sampler(vocab_size=V) as sc:
        rg = sg.sample(x, seed=3, top_k=100, outputs=("tokens", "probs"),
                       probs_dtype=probs_dtype)
        assert rg.probs.dtype == getattr(torch, probs_dtype)
        rc = sc.sample(_np(x), seed=3, top_k=100, outputs=("tokens", "probs"))
        torch.cuda.synchronize()
        np.testing.assert_allclose(_np(rg.probs).astype(np.float64), rc.probs,
                                   rtol=1e-2 if probs_dtype != "float32" else 1e-5, atol=1e-6)
        # strided out_probs inside a wider buffer
        buf = torch.full((rows, V + 64), -1.0, device="cuda")
        sg.sample(x, seed=3, top_k=100, out_probs=buf[:, 32:32 + V])
        torch.cuda.synchronize()
        assert bool((buf[:, :32] == -1).all()) and bool((buf[:, 32 + V:] == -1).all())


def test_torch_stash_parity(torch):
    V, rows, n = 5000, 12, 8
    x = torch.randn(rows, V, device="cuda").to(torch.bfloat16)
    offs = [0, 5, 12]
    with dds.Sampler(vocab_size=V, backend="cuda") as sg, dds.Sampler(vocab_size=V) as sc:
        rg = sg.stash_logprobs(x, row_offsets=offs, num_top=n, keep=[1, 1], temperature=0.9)
        hx, hdt = _host_logits(x)
        rc = sc.stash_logprobs(hx, dtype=hdt, row_offsets=offs, num_top=n, keep=[1, 1],
                               temperature=0.9)
        torch.cuda.synchronize()
        np.testing.assert_array_equal(_np(rg.token_ids), rc.token_ids)
        np.testing.assert_array_equal(_np(rg.ranks), rc.ranks)
        np.testing.assert_allclose(_np(rg.logprobs), rc.logprobs, rtol=1e-5, atol=1e-6)


def test_torch_non_default_stream(torch):
    """Work goes on the current torch stream: the logits are written on a side stream after a
    long sleep; a sampler reading them on another stream would see the zeros."""
    V, rows = 2048, 64
    real = torch.randn(rows, V, device="cuda")
    with dds.Sampler(vocab_size=V, backend="cuda") as sg, dds.Sampler(vocab_size=V) as sc:
        want = sc.sample(_np(real), row_offsets=[0, rows], seed=11).tokens
        x = torch.zeros(rows, V, device="cuda")
        out = torch.full((rows,), -1, dtype=torch.int32, device="cuda")
        offs = torch.tensor([0, rows], dtype=torch.int32, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time before the logits appear
            x.copy_(real)
            sg.sample(x, row_offsets=offs, seed=11, out_tokens=out)
        side.synchronize()
        np.testing.assert_array_equal(_np(out), want)
        # stream= given explicitly while the current stream is the default one
        out2 = torch.full((rows,), -1, dtype=torch.int32, device="cuda")
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(200_000_000)
            x2 = real.clone()
        r = sg.sample(x2, row_offsets=[0, rows], seed=11, out_tokens=out2, stream=side)
        assert r.tokens is out2
        side.synchronize()
        np.testing.assert_array_equal(_np(out2), want)
        # allocated outputs on an explicit stream
        r3 = sg.sample(real, row_offsets=[0, rows], seed=11, stream=side.cuda_stream)
        side.synchronize()
        np.testing.assert_array_equal(_np(r3.tokens), want)


def test_torch_planned_calls(torch):
    """Calls after the first run from the sampler's plan (dds.i dds_py_sample_planned): a decode
    loop with fewer rows and requests each step, device row_offsets / seeds (int64) / steps
    (int32), bf16 logits, given and allocated outputs, equal to the CPU backend; then a planned
    call made while a side stream is current goes on that stream."""
    V = 5000
    with dds.Sampler(vocab_size=V, backend="cuda", max_rows=64) as sg, \
            dds.Sampler(vocab_size=V, max_rows=64) as sc:
        for step, offs in enumerate(([0, 20, 40, 64], [0, 18, 33, 50], [0, 9, 21], [0, 5])):
            n, R = offs[-1], len(offs) - 1
            x = (2 * torch.randn(n, V, device="cuda")).to(torch.bfloat16)
            seeds = torch.arange(R, dtype=torch.int64, device="cuda") * 11 + 1
            steps = torch.full((R,), step, dtype=torch.int32, device="cuda")
            out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
            rg = sg.sample(x, row_offsets=torch.tensor(offs, dtype=torch.int32, device="cuda"),
                           seed=seeds, step=steps, temperature=0.9, top_p=0.95,
                           out_tokens=out, outputs=("confidence", "entropy", "request_status"))
            assert len(sg._plans) == 1 and rg.tokens is out
            hx, hdt = _host_logits(x)
            rc = sc.sample(hx, dtype=hdt, row_offsets=offs, seed=_np(seeds).astype(np.uint64),
                           step=_np(steps).astype(np.uint32), temperature=0.9, top_p=0.95,
                           outputs=("tokens", "confidence", "entropy", "request_status"))
            torch.cuda.synchronize()
            _compare(rg, rc, max_token_mismatch=1)
        real = torch.randn(8, V, device="cuda")
        want = sc.sample(_np(real), seed=5).tokens
        sg.sample(real, seed=4, outputs=("tokens",))
        n_plans = len(sg._plans)
        x = torch.zeros(8, V, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(200_000_000)  # the logits appear late, on the side stream
            x.copy_(real)
            r = sg.sample(x, seed=5, outputs=("tokens",))
        assert len(sg._plans) == n_plans  # the planned path ran
        side.synchronize()
        np.testing.assert_array_equal(_np(r.tokens), want)


def test_torch_cuda_graph_replay_with_new_seeds(torch):
    V, rows = 4096, 96
    offs = [0, 32, 96]
    x = torch.randn(rows, V, device="cuda")
    offs_dev = torch.tensor(offs, dtype=torch.int32, device="cuda")
    seeds = torch.zeros(2, dtype=torch.int64, device="cuda")
    steps = torch.zeros(2, dtype=torch.int32, device="cuda")
    temps = torch.tensor([1.0, 0.8], device="cuda")
    out = torch.full((rows,), -1, dtype=torch.int32, device="cuda")
    conf = torch.zeros(rows, device="cuda")
    with dds.Sampler(vocab_size=V, backend="cuda", max_rows=rows) as sg, \
            dds.Sampler(vocab_size=V, max_rows=rows) as sc:

        def step():
            sg.sample(x, row_offsets=offs_dev, seed=seeds, step=steps, temperature=temps,
                      top_k=64, out_tokens=out, out_confidence=conf)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside capture
            step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        hx = _np(x)
        seen = []
        for new_seeds, new_steps in (([1, 2], [0, 0]), ([3, 2 ** 62], [1, 7]), ([1, 2], [0, 0])):
            seeds.copy_(torch.tensor(new_seeds, dtype=torch.int64))
            steps.copy_(torch.tensor(new_steps, dtype=torch.int32))
            graph.replay()
            torch.cuda.synchronize()
            want = sc.sample(hx, row_offsets=offs, seed=np.array(new_seeds, np.uint64),
                             step=np.array(new_steps, np.uint32), temperature=[1.0, 0.8],
                             top_k=64, outputs=("tokens", "confidence"))
            got = _np(out)
            assert int((got != want.tokens).sum()) <= 1
            np.testing.assert_allclose(_np(conf), want.confidence, rtol=1e-5, atol=1e-6)
            seen.append(got.copy())
        assert not np.array_equal(seen[0], seen[1])  # new seeds, new draws
        np.testing.assert_array_equal(seen[0], seen[2])  # same seeds, same draws


def test_cupy_arrays(cupy):
    V, rows = 1500, 30
    rs = cupy.random.RandomState(5)
    x32 = (2.0 * rs.standard_normal((rows, V))).astype(cupy.float32)
    offs = [0, 10, 30]
    with dds.Sampler(vocab_size=V, backend="cuda") as sg, dds.Sampler(vocab_size=V) as sc:
        for x in (x32, x32.astype(cupy.float16)):
            rg = sg.sample(x, row_offsets=cupy.asarray(offs, dtype=cupy.int32),
                           seed=cupy.asarray([4, 9], dtype=cupy.uint64),
                           temperature=cupy.asarray([0.9, 1.0], dtype=cupy.float32),
                           top_p=0.95, outputs=("tokens", "argmax", "logprobs", "entropy"))
            assert isinstance(rg.tokens, cupy.ndarray)
            rc = sc.sample(x.get(), row_offsets=offs, seed=np.array([4, 9], np.uint64),
                           temperature=[0.9, 1.0], top_p=0.95,
                           outputs=("tokens", "argmax", "logprobs", "entropy"))
            cupy.cuda.get_current_stream().synchronize()
            _compare(rg, rc, what=("logprobs", "entropy"), max_token_mismatch=1)
        # a non-default CuPy stream is picked up as the current stream
        st = cupy.cuda.Stream(non_blocking=True)
        with st:
            rg = sg.sample(x32, row_offsets=offs, seed=[4, 9])
        st.synchronize()
        rc = sc.sample(x32.get(), row_offsets=offs, seed=[4, 9])
        assert int((rg.tokens.get() != rc.tokens).sum()) <= 1
        # stash through CuPy
        sg_st = sg.stash_logprobs(x32, row_offsets=offs, num_top=5)
        sc_st = sc.stash_logprobs(x32.get(), row_offsets=offs, num_top=5)
        cupy.cuda.get_current_stream().synchronize()
        np.testing.assert_array_equal(sg_st.token_ids.get(), sc_st.token_ids)


def test_wrong_memory_for_backend(torch):
    V = 16
    with dds.Sampler(vocab_size=V, backend="cuda") as sg, dds.Sampler(vocab_size=V) as sc:
        with pytest.raises(TypeError, match="logits"):
            sg.sample(np.zeros((2, V), np.float32))
        with pytest.raises(TypeError, match="logits"):
            sc.sample(torch.zeros(2, V, device="cuda"))
        with pytest.raises(TypeError, match="temperature"):
            sg.sample(torch.zeros(2, V, device="cuda"),
                      temperature=torch.ones(2, dtype=torch.float64, device="cuda"))
        with pytest.raises(TypeError, match="out_tokens"):
            sg.sample(torch.zeros(2, V, device="cuda"), out_tokens=np.zeros(2, np.int32))
        with pytest.raises(ValueError, match="logits"):
            sg.sample(torch.zeros(V, 2, device="cuda").t())
        if torch.cuda.device_count() > 1:
            with pytest.raises(ValueError, match="device"):
                sg.sample(torch.zeros(2, V, device="cuda:1"))
        # host lists for per-request values are copied to the device for convenience
        r = sg.sample(torch.zeros(2, V, device="cuda"), temperature=[1.0, 0.5], seed=[1, 2])
        torch.cuda.synchronize()
        assert r.tokens.shape == (2,)


def test_torch_cpu_tensors_on_cpu_backend():
    torch = _import("torch", "torch")
    V = 40
    x = torch.randn(5, V)
    with dds.Sampler(vocab_size=V) as s:
        a = s.sample(x, seed=[1, 2, 3, 4, 5], outputs=("tokens", "probs"))
        b = s.sample(x.numpy(), seed=[1, 2, 3, 4, 5], outputs=("tokens", "probs"))
        assert isinstance(a.tokens, torch.Tensor)
        np.testing.assert_array_equal(a.tokens.numpy(), b.tokens)
        xb = x.to(torch.bfloat16)
        c = s.sample(xb, seed=[1, 2, 3, 4, 5], probs_dtype="bfloat16", outputs=("probs",))
        assert c.probs.dtype == torch.bfloat16


def test_torch_reveal_parity(torch):
    R, per = 4, 300
    rows = R * per
    g = torch.Generator(device="cuda").manual_seed(3)
    scores = torch.rand(rows, device="cuda", generator=g)
    offs = list(range(0, rows + 1, per))
    MASK = 7
    canvas = torch.full((R, per + 10), MASK, dtype=torch.int32, device="cuda")
    tokens = torch.randint(0, 6, (rows,), dtype=torch.int32, device="cuda", generator=g)
    kw = dict(policy=torch.tensor([0, 1, 2, 3], dtype=torch.int32, device="cuda"),
              count=[5, 1, 1, 9], threshold=0.99, factor=1.0, seed=[1, 2, 3, 4], step=2,
              mask_token=MASK)
    with dds.Sampler(vocab_size=8, backend="cuda", max_rows=rows) as sg, \
            dds.Sampler(vocab_size=8, max_rows=rows) as sc:
        rg = sg.reveal(scores, row_offsets=offs, canvas=canvas, tokens=tokens,
                       outputs=REVEAL_ALL, **kw)
        hcanvas = np.full((R, per + 10), MASK, np.int32)
        hkw = dict(kw, policy=[0, 1, 2, 3])
        rc = sc.reveal(_np(scores), row_offsets=offs, canvas=hcanvas, tokens=_np(tokens),
                       outputs=REVEAL_ALL, **hkw)
        torch.cuda.synchronize()
    np.testing.assert_array_equal(_np(rg.reveal), rc.reveal)
    np.testing.assert_array_equal(_np(rg.num_revealed), rc.num_revealed)
    np.testing.assert_array_equal(_np(canvas), hcanvas)
    np.testing.assert_array_equal(_np(rg.request_status), rc.request_status)


def test_torch_verify_drafts(torch):
    V, R, n = 1000, 8, 3
    g = torch.Generator(device="cuda").manual_seed(4)
    target = torch.randn(R * (n + 1), V, device="cuda", generator=g)
    draft = torch.randn(R * n, V, device="cuda", generator=g)
    dtoks = torch.randint(0, V, (R, n), dtype=torch.int32, device="cuda", generator=g)
    with dds.Sampler(vocab_size=V, backend="cuda") as sg, dds.Sampler(vocab_size=V) as sc:
        rg = sg.verify_drafts(target, draft, dtoks, seed=[1] * R, top_k=50, outputs=VERIFY_ALL)
        torch.cuda.synchronize()
        rc = sc.verify_drafts(_np(target), _np(draft), _np(dtoks), seed=[1] * R, top_k=50,
                              outputs=VERIFY_ALL)
    np.testing.assert_array_equal(_np(rg.accepted_counts), rc.accepted_counts)
    np.testing.assert_array_equal(_np(rg.tokens), rc.tokens)
    np.testing.assert_allclose(_np(rg.logprobs), rc.logprobs, rtol=1e-5, atol=1e-6)


# ---- vocabulary-parallel (dds_shard.h) on one GPU ---------------------------------------------
@pytest.mark.parametrize("R", [1, 2, 3, 8])
@pytest.mark.parametrize("how", ["even", "aligned"])
@pytest.mark.parametrize("cfg", ["plain", "filters_guided"])
def test_cuda_sharded_matches_cpu_sample(torch, R, how, cfg):
    """R ranks simulated on column slices of one CUDA logits tensor, the all-gather a device
    copy (torch.cat into the gathered segment); compared with the CPU backend's sample on the
    full rows (the oracle): tokens identical (near-ties of block sums counted), stats 1e-5."""
    V, rows = 9000, 12
    offsets = [0, 4, 4, 12]
    g = torch.Generator(device="cpu").manual_seed(R * 10 + len(how))
    x = (torch.randn(rows, V, generator=g) * 3).cuda()
    u = (torch.randn(rows, V, generator=g) * 3).cuda()
    if how == "even":
        cuts = [i * V // R for i in range(R + 1)]
    else:
        cuts = [min(i * 1024, V) for i in range(R)] + [V]
    kw = dict(row_offsets=offsets, seed=[5, 6, 7], step=2,
              outputs=("tokens", "argmax", "logprobs", "confidence", "margin", "entropy",
                       "request_status"))
    guided = cfg == "filters_guided"
    if guided:
        kw.update(top_k=20, top_p=0.9, min_p=0.02, guidance_scale=[1.5, 0.0, 2.0])
    with dds.Sampler(V, backend="cuda", max_rows=64) as sg, dds.Sampler(V, max_rows=64) as sc:
        cpu = sc.sample(x.cpu().numpy(), uncond_logits=u.cpu().numpy() if guided else None,
                        **kw)

        def gather(out, records):
            out.copy_(torch.cat(records))

        res = dds.sample_sharded(sg, [x[:, cuts[i]:cuts[i + 1]] for i in range(R)],
                                 uncond_slices=([u[:, cuts[i]:cuts[i + 1]] for i in range(R)]
                                                if guided else None),
                                 all_gather=gather, **kw)
        torch.cuda.synchronize()
    assert len(res) == R
    for r in res:
        assert r.tokens.is_cuda
        _compare(r, cpu, max_token_mismatch=1)
