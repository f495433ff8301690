"""torch.compile of a whole decode step: Sampler.reveal, verify_drafts and stash_logprobs traced
as the custom operators torch.ops.dds.{reveal, verify_drafts, stash_logprobs}[_out]
(dds/_torch_ops.py), compiled with fullgraph=True and no graph break, equal to the eager calls
exactly.

CPU backend with CPU tensors here (skipped when torch is not installed: CI does not install it);
the CUDA test (mode="reduce-overhead", CUDA graphs) is marked gpu. Each test compiles one
function once and calls it over several steps.
"""

import os

import pytest

import dds

torch = pytest.importorskip("torch", reason="torch is not installed (torch.compile tests need it)")
from torch._dynamo.utils import counters  # noqa: E402

from dds import _decode, _torch_ops  # noqa: E402

V = 48
OFFS = [0, 3, 4, 9]  # three requests: 3, 1 and 5 rows
CL = 8  # canvas length


@pytest.fixture(scope="module")
def sampler():
    s = dds.Sampler(vocab_size=V, max_rows=16, max_requests=16)
    yield s
    s.close()


def _equal(got, want, what):
    assert len(got) == len(want), what
    for i, (a, b) in enumerate(zip(got, want)):
        assert (a is None) == (b is None), f"{what}[{i}]"
        if a is not None:
            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=f"{what}[{i}]")


def _logits(seed, rows, cols=V):
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))


def test_ops_pass_opcheck(sampler):
    """torch.library.opcheck (schema and declared mutations, fake shapes, dispatch) of the six
    operators, with the arguments a traced call passes."""
    x = _logits(1, 9)
    conf = torch.rand(9, generator=torch.Generator().manual_seed(2))
    toks = torch.randint(0, V, (9,), dtype=torch.int32)
    offs = torch.tensor(OFFS, dtype=torch.int32)
    seeds = torch.tensor([5, 6, 7], dtype=torch.int64)
    calls = [
        ("reveal", dict(scores=conf, row_offsets=offs, policy=["top_n", "random", "threshold"],
                        count=torch.tensor([0, 1, 3], dtype=torch.int32), steps_left=2,
                        seed=seeds, step=3,
                        outputs=("reveal", "num_revealed", "request_status"))),
        ("reveal", dict(scores=conf, row_offsets=OFFS, canvas=torch.zeros(3, CL, dtype=torch.int32),
                        tokens=toks, count=2, eos_token=5, mask_token=0,
                        outputs=("reveal", "finished"))),
        ("verify_drafts", dict(target_logits=x, draft_logits=_logits(3, 6),
                               draft_tokens=torch.tensor([[1, 2], [3, 4], [5, 6]],
                                                         dtype=torch.int32),
                               seed=seeds, top_k=[0, 5, 3],
                               outputs=("accepted_counts", "tokens", "logprobs"))),
        ("verify_drafts", dict(target_logits=x, out_tokens=torch.empty(9, 1, dtype=torch.int32),
                               temperature=0.7, outputs=("request_status",))),
        ("stash_logprobs", dict(logits=x, row_offsets=OFFS, num_top=3, keep=[1, 0, 1],
                                outputs=("token_ids", "logprobs", "ranks", "request_status"))),
        ("stash_logprobs", dict(logits=x, row_offsets=offs, num_top=2,
                                out_logprobs=torch.full((3, 5, 3), 7.0))),
    ]
    seen = set()
    for method, kw in calls:
        name, args, _, _ = _torch_ops.op_call(sampler, method, **kw)
        seen.add(name)
        torch.library.opcheck(getattr(torch.ops.dds, name).default, tuple(args))
    assert seen == {"reveal", "reveal_out", "verify_drafts", "verify_drafts_out",
                    "stash_logprobs", "stash_logprobs_out"}


@pytest.fixture(scope="module")
def decode_runs(sampler):
    """One decode step compiled once with fullgraph=True and run over 3 steps beside the eager
    step: sample -> reveal (canvas written in place, EOS rule) -> a second reveal allocating
    its outputs; verify_drafts on [R, k, V] logits with per-request draft counts, and on target
    rows alone into an out_* tensor; stash_logprobs with each request's own token ids (padded
    outputs allocated) and into 3-D out_* tensors that give the geometry (logits mode).
    Per-request seeds and steps are tensors. Returns ({output: [(compiled, eager) per step]},
    the dynamo counters after the compiled runs)."""
    offs = torch.tensor(OFFS, dtype=torch.int32)
    counts = torch.tensor([0, 1, 3], dtype=torch.int32)  # 0: ceil(eligible / steps_left)
    pos = torch.tensor([0, 1, 2, 0, 0, 1, 2, 3, 4], dtype=torch.int32)
    draft_counts = torch.tensor([2, 1, 0], dtype=torch.int32)
    token_ids = torch.tensor([[1, 2], [3, 4], [5, 6]], dtype=torch.int32)
    w = _logits(5, 16)

    def step_fn(h, canvas, seeds, steps, target, draft, drafts, out_tokens, keep, out_ids,
                out_lp):
        r = sampler.sample(h @ w, row_offsets=offs, seed=seeds, step=steps, temperature=0.9,
                           outputs=("tokens", "confidence", "entropy"))
        rv = sampler.reveal(r.confidence, row_offsets=offs, positions=pos,
                            policy=["top_n", "threshold", "random"], count=counts,
                            steps_left=2, threshold=0.2, seed=seeds, step=steps, canvas=canvas,
                            tokens=r.tokens, mask_token=0, eos_token=7,
                            outputs=("num_revealed", "finished", "request_status"))
        eb = sampler.reveal(r.entropy, row_offsets=offs, policy="entropy_bound",
                            entropy_bound=0.5, eligible=rv.reveal == 0,
                            outputs=("reveal", "num_revealed"))
        v = sampler.verify_drafts(target, draft, drafts, draft_counts=draft_counts, seed=seeds,
                                  step=1, top_k=[0, 5, 3], temperature=[1.0, 0.5, 0.8],
                                  banned_token=0,
                                  outputs=("accepted_counts", "tokens", "logprobs",
                                           "request_status"))
        v0 = sampler.verify_drafts(target.reshape(9, V), seed=2 ** 63 + 5,
                                   out_tokens=out_tokens, outputs=("logprobs",))
        sa = sampler.stash_logprobs(target.reshape(9, V), row_offsets=offs, rows_per_slot=5,
                                    keep=keep, slots=[2, 0, 1], num_valid=[3, 1, 4],
                                    temperature=0.7, token_ids=token_ids,
                                    num_token_ids=[2, 1, 2],
                                    outputs=("token_ids", "logprobs", "ranks",
                                             "request_status"))
        sb = sampler.stash_logprobs(target.reshape(9, V), row_offsets=OFFS, num_top=3,
                                    logits_mode="logits",
                                    committed_tokens=r.tokens, out_token_ids=out_ids,
                                    out_logprobs=out_lp, outputs=("ranks",))
        return {"sample": (r.tokens, r.confidence), "reveal": tuple(rv) + (canvas,),
                "reveal_alloc": tuple(eb), "verify": tuple(v), "verify_out": tuple(v0),
                "stash": tuple(sa), "stash_out": tuple(sb) + (out_ids, out_lp)}

    def make_args(step):
        g = torch.Generator().manual_seed(step)
        return (_logits(4 + step, 9, 16), torch.zeros(3, CL, dtype=torch.int32),
                torch.tensor([11 + step, 12, 2 ** 40], dtype=torch.int64),
                torch.full((3,), step, dtype=torch.int32),
                _logits(10 + step, 9).reshape(3, 3, V), _logits(20 + step, 6).reshape(3, 2, V),
                torch.randint(0, V, (3, 2), dtype=torch.int32, generator=g),
                torch.empty(9, 1, dtype=torch.int32),
                torch.tensor([1, step % 2, 1], dtype=torch.uint8),
                torch.zeros(3, 5, 4, dtype=torch.int32), torch.full((3, 5, 4), -1.0))

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(step_fn, fullgraph=True)
    runs: dict = {}
    for step in range(3):
        got, want = compiled(*make_args(step)), step_fn(*make_args(step))
        for k in want:
            runs.setdefault(k, []).append((got[k], want[k]))
    seen = {k: dict(v) for k, v in counters.items()}
    torch._dynamo.reset()
    return runs, seen


def test_compile_has_no_graph_break(decode_runs):
    _, seen = decode_runs
    assert not seen.get("graph_break"), seen.get("graph_break")
    assert seen["stats"]["unique_graphs"] == 1, seen["stats"]


@pytest.mark.parametrize("name", ["sample", "reveal", "reveal_alloc", "verify", "verify_out",
                                  "stash", "stash_out"])
def test_compile_equals_eager(decode_runs, name):
    """Outputs (and tensors written in place) of each call equal to eager's, exactly."""
    for step, (got, want) in enumerate(decode_runs[0][name]):
        _equal(got, want, f"{name} step {step}")


def test_compile_reveal_counts(decode_runs):
    """The compiled reveal did its work: request 0 (top_n, count 0, steps_left 2) reveals
    ceil(3 / 2) = 2 rows, request 2 (random, count 3) 3 rows, and the canvas holds the
    tokens of the revealed rows at their positions."""
    pos = torch.tensor([0, 1, 2, 0, 0, 1, 2, 3, 4])
    req = torch.tensor([0, 0, 0, 1, 2, 2, 2, 2, 2])
    for (got, _), (tok, _) in zip(decode_runs[0]["reveal"], decode_runs[0]["sample"]):
        reveal, num_revealed, _, _, canvas = got
        assert num_revealed[0].item() == 2 and num_revealed[2].item() == 3
        assert reveal.sum().item() == num_revealed.sum().item()
        reveal = reveal.bool()
        assert torch.equal(canvas[req[reveal], pos[reveal]], tok[0][reveal])


def test_compile_rejects_bad_arguments(sampler):
    x = _logits(0, 9)
    offs = torch.tensor(OFFS, dtype=torch.int32)
    bad = [
        ("rows_per_slot", lambda x: sampler.stash_logprobs(x, row_offsets=offs, num_top=2)),
        ("policy", lambda x: sampler.reveal(x[:, 0], policy="nope")),
        ("stream", lambda x: sampler.verify_drafts(x, stream=0)),
        ("scores", lambda x: sampler.reveal([0.5] * 9)),
    ]
    for what, fn in bad:
        torch._dynamo.reset()
        with pytest.raises(Exception, match=what):
            torch.compile(fn, fullgraph=True)(x)


def test_traced_methods_hand_over_every_argument(sampler, monkeypatch):
    """While torch.compile traces, reveal / verify_drafts / stash_logprobs go to the traced call
    with their arguments as given (dynamo traces *args / **kwargs, not locals()), and the traced
    call rebuilds every parameter from them and the defaults."""
    import inspect

    seen = []
    monkeypatch.setattr(_decode, "_torch_compiling", lambda: True)
    monkeypatch.setattr(_decode, "_torch_traced", lambda *a: seen.append(a) or "traced")
    x = _logits(0, 9)
    assert sampler.reveal(x[:, 0], row_offsets=OFFS, count=1) == "traced"
    assert sampler.verify_drafts(x, None, seed=3) == "traced"
    assert sampler.stash_logprobs(x, row_offsets=OFFS, num_top=2) == "traced"
    assert [(n, s is sampler, len(a), sorted(k)) for n, s, a, k in seen] == [
        ("reveal", True, 1, ["count", "row_offsets"]),
        ("verify_drafts", True, 2, ["seed"]),
        ("stash_logprobs", True, 1, ["num_top", "row_offsets"])]
    for m in ("reveal", "verify_drafts", "stash_logprobs"):
        params = list(inspect.signature(getattr(dds.Sampler, m)).parameters)[1:]
        assert sorted(set(_torch_ops._POSITIONAL[m]) | set(_torch_ops._DEFAULTS[m])) == sorted(params), m
        assert params[:len(_torch_ops._POSITIONAL[m])] == _torch_ops._POSITIONAL[m], m


def test_eager_calls_do_not_dispatch(sampler, monkeypatch):
    """Outside torch.compile the methods keep their direct path (no operator dispatch)."""
    def fail(*args):
        raise AssertionError("eager call went through torch.ops.dds")

    monkeypatch.setattr(_torch_ops, "_decode_run", fail)
    x = _logits(0, 9)
    assert sampler.reveal(x[:, 0], row_offsets=OFFS, count=1).reveal.sum().item() == 3
    assert sampler.verify_drafts(x).tokens.shape == (9, 1)
    assert sampler.stash_logprobs(x, row_offsets=OFFS, num_top=2).logprobs.shape == (3, 5, 3)


@pytest.mark.gpu
def test_compile_decode_step_reduce_overhead_cuda():
    """A decode step (sample -> reveal into a canvas, verify_drafts, stash_logprobs) under
    torch.compile(mode="reduce-overhead", fullgraph=True) on CUDA tensors: replays equal to
    eager."""
    if not torch.cuda.is_available() or not dds.has_cuda():
        if os.environ.get("DDS_REQUIRE_GPU") == "1":
            pytest.fail("DDS_REQUIRE_GPU=1 but no CUDA device / CUDA backend")
        pytest.skip("needs a CUDA device and libdds with the CUDA backend")
    Vc, dev = 32000, torch.device("cuda", 0)
    s = dds.Sampler(vocab_size=Vc, backend="cuda", max_rows=64, max_requests=8)
    offs = torch.tensor([0, 8, 20, 32], dtype=torch.int32, device=dev)
    seeds = torch.tensor([1, 2, 3], dtype=torch.int64, device=dev)
    steps = torch.zeros(3, dtype=torch.int32, device=dev)
    counts = torch.tensor([2, 4, 1], dtype=torch.int32, device=dev)
    drafts = torch.randint(0, Vc, (3, 2), dtype=torch.int32, device=dev)

    def fn(h, w):
        logits = (h @ w).to(torch.bfloat16)
        r = s.sample(logits, row_offsets=offs, seed=seeds, step=steps, temperature=0.8,
                     top_k=50, outputs=("tokens", "confidence"))
        rv = s.reveal(r.confidence, row_offsets=offs, count=counts, seed=seeds, step=steps,
                      outputs=("reveal", "num_revealed"))
        v = s.verify_drafts(logits[:9], logits[9:15], drafts, seed=seeds, step=steps,
                            outputs=("accepted_counts", "tokens", "logprobs"))
        st = s.stash_logprobs(logits, row_offsets=offs, rows_per_slot=12, num_top=4)
        return (r.tokens, *rv[:2], *v[:3], *st[:3])

    compiled = torch.compile(fn, mode="reduce-overhead", fullgraph=True)
    g = torch.Generator(device=dev).manual_seed(0)
    h = torch.randn(32, 64, device=dev, generator=g)
    w = torch.randn(64, Vc, device=dev, generator=g)
    for i in range(5):
        seeds.add_(7)
        steps.fill_(i)
        got = [t.clone() for t in compiled(h, w)]
        want = fn(h, w)
        for j, (a, b) in enumerate(zip(got, want)):  # floats: as test_torch_compile.py
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"replay {i} output {j}")
    s.close()
