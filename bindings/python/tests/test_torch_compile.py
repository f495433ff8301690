"""torch.compile: Sampler.sample traced as the custom operators torch.ops.dds.sample /
sample_out (dds/_torch_ops.py), compiled with fullgraph=True, equal to the eager call.

CPU backend with CPU tensors here (skipped when torch is not installed: CI does not install it,
its wheel and dependencies take minutes); the CUDA test (mode="reduce-overhead", CUDA graphs)
is marked gpu.
"""

import os

import numpy as np
import pytest

import dds

torch = pytest.importorskip("torch", reason="torch is not installed (torch.compile tests need it)")

V = 40
OUTS = ("tokens", "logprobs", "argmax", "confidence", "margin", "entropy", "probs",
        "request_status")


def _assert_equal(a, b):
    for name in OUTS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            torch.testing.assert_close(x, y, rtol=0, atol=0, msg=name)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_ops_are_registered_and_pass_opcheck():
    s = dds.Sampler(vocab_size=V, max_rows=8)
    x = torch.randn(6, V)
    offs = torch.tensor([0, 2, 6], dtype=torch.int32)
    seeds = torch.tensor([5, 6], dtype=torch.int64)
    mask = sum(1 << i for i in range(len(OUTS)))
    head = (s._op_id, x, offs, None, None, None, 0.0, None, 0.8, None, 3, None, 1.0, None,
            0.0, None, 0, seeds, 2, None, -1, 0)
    torch.library.opcheck(torch.ops.dds.sample.default, head + (mask, None, None, None))
    outs = [torch.empty(6, dtype=torch.int32), None, None, torch.empty(6), None, None, None,
            torch.empty(2, dtype=torch.int32)]
    torch.library.opcheck(torch.ops.dds.sample_out.default,
                          head + (0, None, None, None, *outs))
    eager = s.sample(x, row_offsets=offs, temperature=0.8, top_k=3, seed=seeds, step=2,
                     outputs=OUTS)
    got = torch.ops.dds.sample(*head, mask, None, None, None)  # dtype, probs_dtype, masks
    for name, t in zip(OUTS, got):
        torch.testing.assert_close(t, getattr(eager, name), rtol=0, atol=0, msg=name)
    s.close()


def test_compile_fullgraph_cpu():
    s = dds.Sampler(vocab_size=V, max_rows=16, max_requests=4)
    offs = torch.tensor([0, 3, 4, 9], dtype=torch.int32)
    temps = torch.tensor([0.7, 1.0, 1.3], dtype=torch.float32)

    def step_fn(h, w, seeds, step):
        logits = h @ w  # a "model": the sampler's input is a graph intermediate
        r = s.sample(logits, row_offsets=offs, temperature=temps, top_p=0.9, min_p=0.01,
                     seed=seeds, step=step, banned_token=0, outputs=OUTS)
        return r

    compiled = torch.compile(step_fn, fullgraph=True)
    g = torch.Generator().manual_seed(0)
    h, w = torch.randn(9, 8, generator=g), torch.randn(8, V, generator=g)
    seeds = torch.tensor([11, 12, 2 ** 40], dtype=torch.int64)
    for step in range(4):  # a new step each call: one graph (the int becomes dynamic)
        seeds += 1
        _assert_equal(compiled(h, w, seeds, step), step_fn(h, w, seeds, step))


def test_compile_out_tensors_and_lists_cpu():
    s = dds.Sampler(vocab_size=V, max_rows=8)

    def fn(x, out_tokens, out_entropy):
        return s.sample(x, row_offsets=[0, 1, 5], seed=[3, 2 ** 64 - 1], top_k=[4, 0],
                        temperature=0.5, out_tokens=out_tokens, out_entropy=out_entropy,
                        outputs=("confidence",), stats="guided")

    compiled = torch.compile(fn, fullgraph=True)
    x = torch.randn(5, V)
    ta, ea = torch.empty(5, dtype=torch.int32), torch.empty(5)
    tb, eb = torch.empty(5, dtype=torch.int32), torch.empty(5)
    a = compiled(x, ta, ea)
    b = fn(x, tb, eb)
    assert a.tokens is ta and b.tokens is tb  # written in place, returned as given
    _assert_equal(a, b)
    torch.testing.assert_close(ta, tb, rtol=0, atol=0)


def test_compile_rejects_bad_arguments():
    s = dds.Sampler(vocab_size=V, max_rows=8)
    x = torch.randn(2, V)
    with pytest.raises(Exception, match="outputs"):
        torch.compile(lambda x: s.sample(x, outputs=("nope",)), fullgraph=True)(x)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="top_k"):
        torch.compile(lambda x: s.sample(x, top_k=-(2 ** 40)), fullgraph=True)(x)


@pytest.mark.gpu
def test_compile_reduce_overhead_cuda():
    """CUDA graphs through torch.compile(mode="reduce-overhead"): replays equal to eager."""
    if not torch.cuda.is_available() or not dds.has_cuda():
        if os.environ.get("DDS_REQUIRE_GPU") == "1":
            pytest.fail("DDS_REQUIRE_GPU=1 but no CUDA device / CUDA backend")
        pytest.skip("needs a CUDA device and libdds with the CUDA backend")
    Vc = 32000
    s = dds.Sampler(vocab_size=Vc, backend="cuda", max_rows=64)
    dev = torch.device("cuda", 0)
    offs = torch.tensor([0, 8, 20, 32], dtype=torch.int32, device=dev)
    seeds = torch.tensor([1, 2, 3], dtype=torch.int64, device=dev)
    steps = torch.zeros(3, dtype=torch.int32, device=dev)

    def fn(h, w):
        logits = (h @ w).to(torch.bfloat16)
        r = s.sample(logits, row_offsets=offs, seed=seeds, step=steps, temperature=0.8,
                     top_k=50, outputs=("tokens", "confidence", "entropy"))
        return r.tokens, r.confidence, r.entropy

    compiled = torch.compile(fn, mode="reduce-overhead", fullgraph=True)
    g = torch.Generator(device=dev).manual_seed(0)
    h = torch.randn(32, 64, device=dev, generator=g)
    w = torch.randn(64, Vc, device=dev, generator=g)
    for i in range(5):
        seeds.add_(7)
        steps.fill_(i)
        got = [t.clone() for t in compiled(h, w)]
        want = fn(h, w)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
