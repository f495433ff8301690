"""dds.omnivoice.OmniVoiceSampler over a decode loop's steps, on the CPU backend: the torch path
gives the numpy path's tokens and log-probabilities, unguided cells of a mixed batch never read
the unconditional logits, and a step with an unchanged batch stays a small, fixed set of torch
ops with no host transfer (the GPU path's host cost; counted with a TorchDispatchMode on CPU
tensors)."""

import math

import numpy as np
import pytest

from dds.omnivoice import OmniVoiceSampler, RequestConfig

C, V, MASK = 8, 1025, 1024
CFGS = {"a": RequestConfig(guidance_scale=2.0, temperature=0.9, seed=11),
        "b": RequestConfig(guidance_scale=0.0, temperature=1.2, seed=12),
        "c": RequestConfig(guidance_scale=1.5, temperature=0.0, seed=13),
        "d": RequestConfig(guidance_scale=0.0, temperature=0.0, seed=14)}
IDS, LENS = ["a", "b", "c", "d"], [5, 3, 4, 2]
# a decode loop's iterations: equal, moving evenly (a device shift), moving unevenly (a copy)
ITERS = ([0, 0, 0, 0], [1, 1, 1, 1], [1, 4, 2, 7], [2, 5, 3, 8], [6, 9, 7, 12], [7, 7, 9, 1],
         [8, 8, 8, 8])

# The most torch ops one cached step may dispatch (a mixed batch, bf16 logits, iterations that
# differ between requests): the dds call's 2 output allocations, 5 views (logits, outputs, the
# logit pairs), the token column copy, 2 gathers, 3 dtype conversions, the guidance and -inf
# rule (4), the correction (5) and the step array's shift. On CUDA all but the allocations and
# views are kernel launches.
MAX_STEP_OPS = 24


def omnivoice_token_logprob(c, u, g, tok):
    """OmniVoice's guided log-probability (forbidden class in the normaliser) of token tok,
    float64: l = c + g (c - u), equal to (1 + g) log_softmax(c) - g log_softmax(u) up to a
    constant (omnivoice.py), a class -inf in c or u (g != 0) taken as -inf."""
    c, u = np.asarray(c, np.float64), np.asarray(u, np.float64)
    if g == 0:
        lv = c
    else:
        with np.errstate(invalid="ignore"):
            lv = np.where(np.isneginf(c) | np.isneginf(u), -np.inf, c + g * (c - u))
    m = lv.max()
    return lv[tok] - m - np.log(np.exp(lv - m).sum())


def make_logits(rng, P):
    c = (2.0 * rng.standard_normal((C, P, V))).astype(np.float32)
    u = (c + rng.standard_normal((C, P, V))).astype(np.float32)
    c[..., MASK] += 3.0
    u[..., MASK] = -np.inf  # an unconditional pass that rules the mask token out
    c[1, 2, 7] = -np.inf
    return c, u


def sampler(ids=IDS):
    s = OmniVoiceSampler(V, C, MASK, max_positions=64)
    for rid in ids:
        s.ingest_request(rid, CFGS[rid])
    return s


def test_unguided_cells_never_read_uncond_rows():
    """In a mixed batch with full-shape u_logits, an unguided cell's log-probability is its
    conditional one, whatever the unconditional rows hold (here -inf at the mask token)."""
    rng = np.random.default_rng(3)
    c, u = make_logits(rng, sum(LENS))
    with sampler() as s:
        tok, lp = s.sample(IDS, c, u, LENS, [2, 2, 2, 2])
    starts = np.concatenate([[0], np.cumsum(LENS)[:-1]])
    for rid, s0, n in zip(IDS, starts, LENS):
        g = CFGS[rid].guidance_scale
        for cb in range(C):
            for p in range(s0, s0 + n):
                want = omnivoice_token_logprob(c[cb, p], u[cb, p], g, tok[cb, p])
                assert lp[cb, p] == pytest.approx(want, rel=1e-5, abs=1e-5), (rid, cb, p)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_steps_equal_numpy_steps(dtype):
    """Over a loop's steps (cached batch arrays, iterations equal / moving evenly / unevenly),
    torch CPU tensors give the numpy path's tokens exactly and its log-probabilities to float32
    rounding; compact u_logits and full ones alike."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    c, u = make_logits(rng, sum(LENS))
    ct, ut = torch.from_numpy(c).to(getattr(torch, dtype)), torch.from_numpy(u)
    ut = ut.to(ct.dtype)
    c, u = ct.float().numpy(), ut.float().numpy()  # the values the tensors hold
    guided = [CFGS[r].guidance_scale != 0 for r in IDS]
    starts = np.concatenate([[0], np.cumsum(LENS)[:-1]])
    keep = np.concatenate([np.arange(s0, s0 + n) for s0, n, gd in zip(starts, LENS, guided)
                           if gd])
    for u_np, u_t in ((u, ut), (np.ascontiguousarray(u[:, keep]), ut[:, keep].contiguous())):
        with sampler() as sn, sampler() as st:
            for iters in ITERS:
                tn, ln = sn.sample(IDS, c, u_np, LENS, iters)
                tt, lt = st.sample(IDS, ct, u_t, LENS, iters)
                assert tt.dtype == torch.int64 and lt.dtype == torch.float32
                np.testing.assert_array_equal(tt.numpy(), tn)
                np.testing.assert_allclose(lt.numpy(), ln, rtol=2e-6, atol=2e-6)
            # an unguided-only batch, no u_logits
            tn, ln = sn.sample(["b", "d"], c[:, :5], None, [3, 2], [3, 4])
            tt, lt = st.sample(["b", "d"], ct[:, :5], None, [3, 2], [3, 4])
            np.testing.assert_array_equal(tt.numpy(), tn)
            np.testing.assert_allclose(lt.numpy(), ln, rtol=2e-6, atol=2e-6)


def test_ingest_copies_the_config():
    """The knobs are read at ingest_request: changing the config object afterwards changes
    nothing; ingesting again is taken at the next call."""
    rng = np.random.default_rng(6)
    c, u = make_logits(rng, 4)
    cfg = RequestConfig(temperature=1.0, seed=5)
    with OmniVoiceSampler(V, C, MASK) as s:
        s.ingest_request("x", cfg)
        before = s.sample(["x"], c, None, [4], [1])[0]
        cfg.seed = 6
        np.testing.assert_array_equal(s.sample(["x"], c, None, [4], [1])[0], before)
        s.ingest_request("x", cfg)
        assert not np.array_equal(s.sample(["x"], c, None, [4], [1])[0], before)


class _Watch:
    """Records torch ops (TorchDispatchMode) and the Python-level calls that move data between
    host and device or read a tensor on the host (which on CUDA tensors synchronise)."""

    # (not torch.tensor: patching it, even restored, breaks torch.compile of dds calls in later
    # tests)
    HOST_CALLS = (("Tensor", "item"), ("Tensor", "tolist"), ("Tensor", "cpu"),
                  ("Tensor", "numpy"), ("Tensor", "cuda"), ("Tensor", "to"),
                  ("torch", "from_numpy"), ("torch", "as_tensor"))

    def __init__(self, torch):
        from torch.utils._python_dispatch import TorchDispatchMode

        watch = self

        class Ops(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                name = str(func)
                watch.ops.append(name)
                if name == "aten._local_scalar_dense.default":  # .item() and the like
                    watch.transfers.append(name)
                elif name.startswith("aten._to_copy") and kwargs.get("device") is not None \
                        and kwargs["device"] != args[0].device:
                    watch.transfers.append(name)
                elif name.startswith("aten.copy_") and args[0].device != args[1].device:
                    watch.transfers.append(name)
                return func(*args, **kwargs)

        self.torch, self.mode, self.saved = torch, Ops(), []
        self.ops, self.transfers, self.host = [], [], []

    def __enter__(self):
        self.mode.__enter__()
        for owner, name in self.HOST_CALLS:
            obj = self.torch.Tensor if owner == "Tensor" else self.torch
            f = getattr(obj, name)
            self.saved.append((obj, name, vars(obj).get(name)))  # None: inherited

            def wrap(*a, _f=f, _n=name, **k):
                self.host.append(_n)
                return _f(*a, **k)

            setattr(obj, name, wrap)
        return self

    def __exit__(self, *exc):
        for obj, name, f in self.saved:
            if f is None:
                delattr(obj, name)
            else:
                setattr(obj, name, f)
        self.mode.__exit__(*exc)


@pytest.mark.parametrize("guided", [True, False])
def test_cached_step_is_a_few_torch_ops_without_host_transfers(guided):
    """A step whose batch is unchanged: at most MAX_STEP_OPS torch ops (the count a regression
    raises), none of them a device -> host read (aten._local_scalar_dense: .item()) or a copy
    between devices, and no host round trip at the Python level (.tolist(), .cpu(), .numpy(),
    from_numpy, ...), also when the iterations differ between requests and move evenly."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    ids = IDS if guided else ["b", "d"]
    lens = LENS if guided else [3, 2]
    P = sum(lens)
    c, u = make_logits(rng, P)
    ct = torch.from_numpy(c).to(torch.bfloat16)
    ut = torch.from_numpy(u).to(torch.bfloat16) if guided else None
    with sampler(ids) as s:
        iters = np.array([3, 5, 4, 9][:len(ids)])
        s.sample(ids, ct, ut, lens, list(iters))  # builds the batch arrays (and a dds plan)
        s.sample(ids, ct, ut, lens, [2] * len(ids))  # equal iterations: dds's plan of a scalar
        counts = []
        for shift in (1, 1, 0, None):  # iterations moving evenly, standing, then equal
            iters = iters + (shift or 0)
            with _Watch(torch) as w:
                tok, lp = s.sample(ids, ct, ut, lens,
                                   [7] * len(ids) if shift is None else list(iters))
            assert w.host == [] and w.transfers == [], (w.host, w.transfers)
            assert len(w.ops) <= MAX_STEP_OPS, w.ops
            counts.append(len(w.ops))
        n = counts[-1]
        assert counts == [n + 1, n + 1, n, n], counts  # a shift is one op on the step array
        if not guided:
            assert n <= MAX_STEP_OPS - 8, w.ops  # no u: no guidance, no -inf rule
        # iterations moving unevenly: one host array made, copied to the device on CUDA
        with _Watch(torch) as w:
            s.sample(ids, ct, ut, lens, list(iters[::-1] + 1))
        assert w.host == ["from_numpy"], w.host
    assert tok.dtype == torch.int64 and not math.isnan(float(lp.sum()))


@pytest.mark.gpu
def test_cuda_steps_equal_cpu_steps():
    """The CUDA backend on CUDA tensors over a loop's steps (iterations equal, moving evenly,
    unevenly, and as a device tensor) against the CPU backend: identical tokens (DESIGN.md §5
    near-ties aside: at most 1 in 1000 cells) and log-probabilities within 1e-5."""
    import os

    torch = pytest.importorskip("torch")
    import dds

    if not (torch.cuda.is_available() and dds.has_cuda()):
        if os.environ.get("DDS_REQUIRE_GPU") == "1":
            pytest.fail("DDS_REQUIRE_GPU=1 but no CUDA device / CUDA libdds")
        pytest.skip("needs torch with a CUDA device and libdds with the CUDA backend")
    rng = np.random.default_rng(9)
    c, u = make_logits(rng, sum(LENS))
    cd, ud = torch.from_numpy(c).cuda(), torch.from_numpy(u).cuda()
    ovg = OmniVoiceSampler(V, C, MASK, backend="cuda", max_positions=64)
    with sampler() as cpu, ovg:
        for rid in IDS:
            ovg.ingest_request(rid, CFGS[rid])
        for iters in ITERS:
            tn, ln = cpu.sample(IDS, c, u, LENS, iters)
            for it in (iters, torch.tensor(iters, device="cuda")):
                tg, lg = ovg.sample(IDS, cd, ud, LENS, it)
                same = tg.cpu().numpy() == tn
                assert (~same).sum() <= max(1, tn.size // 1000)
                np.testing.assert_allclose(lg.cpu().numpy()[same], ln[same], rtol=1e-5,
                                           atol=1e-5)
