"""vLLM's own sampling kernels, loaded at run time from files of vLLM placed in the ignored folder
.vllm/ (never committed; scripts/prep-peers.sh extracts them from pinned vllm wheels). Each
loader returns None and a reason when the files or their imports are missing, and the runner then
skips that peer and says so.

- vLLM model-runner-v2 Gumbel sampler: vllm/v1/worker/gpu/sample/gumbel.py
- vLLM's default top-k/top-p Triton sampler (Qrita, arXiv 2602.01518):
  vllm/v1/sample/ops/topk_topp_triton.py (newer releases launch its kernels through vLLM's
  warmup dispatcher, vllm/model_executor/warmup/jit_warmup{,_triton_helper}.py, also vLLM's own)

.vllm/ holds one tree per vLLM release (.vllm/<version>/vllm/..., newest first in .vllm/ORDER):
the newest release's kernels are tried first, and if they do not compile or run with this
machine's Triton (a release is built for one torch/Triton pair) the next one is. A smoke call on
a small input, checked for sanity, decides before any timing.

The rest of vLLM is not installed. The few vLLM modules those files import for configuration
(vllm.envs, vllm.platforms, vllm.triton_utils, vllm.utils.{gpu_sync_debug, math_utils,
platform_utils}) are replaced here by small stand-ins with the same names, written for this
benchmark; the kernels and their launch code are vLLM's, unchanged.
"""
import contextlib
import importlib
import inspect
import os
import sys
import types

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".vllm"))
GUMBEL = "vllm/v1/worker/gpu/sample/gumbel.py"
QRITA = "vllm/v1/sample/ops/topk_topp_triton.py"
LOADED = {}  # peer -> vLLM version it was loaded from
_CACHE = {}  # peer -> (adapter or None, reason): each peer is loaded (and smoke-tested) once


def _module(name, **attrs):
    mod = sys.modules.get(name)
    if mod is None:
        mod = types.ModuleType(name)
        sys.modules[name] = mod
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


class _Platform:
    """Stand-in for vllm.platforms.current_platform on a CUDA machine."""
    device_type = "cuda"

    def is_cuda(self):
        return True

    def is_cuda_alike(self):
        return True

    def is_rocm(self):
        return False

    def is_xpu(self):
        return False

    def is_cpu(self):
        return False

    def is_pin_memory_available(self):
        return True

    def num_compute_units(self, device_id=0):
        import torch
        return torch.cuda.get_device_properties(device_id or 0).multi_processor_count

    def get_device_name(self, device_id=0):
        import torch
        return torch.cuda.get_device_name(device_id or 0)


def _stubs(tree):
    """Fresh `vllm` package whose path is one release's tree under .vllm/."""
    for m in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[m]
    importlib.invalidate_caches()
    import triton
    import triton.language as tl
    try:
        from triton.language.extra import libdevice as tldevice
    except Exception:  # older Triton
        tldevice = tl.math
    pkg = _module("vllm")
    # vLLM's own files are found through the package path; their folders have no __init__.py
    # (namespace packages), so none of vLLM's package initialisers run.
    pkg.__path__ = [os.path.join(tree, "vllm")]
    platform = _Platform()
    envs = _module("vllm.envs", VLLM_TRITON_JIT_WARMUP_NUM_THREADS=1,
                   VLLM_TRITON_FORCE_FIRST_CONFIG=False)
    envs.__getattr__ = lambda name: None  # any other setting: off
    _module("vllm.platforms", current_platform=platform)
    _module("vllm.triton_utils", HAS_TRITON=True, tl=tl, tldevice=tldevice, triton=triton,
            LOG2E=1.4426950408889634, LOGE2=0.6931471805599453)
    utils = _module("vllm.utils")
    utils.__path__ = []
    _module("vllm.utils.gpu_sync_debug", gpu_sync_allowed=contextlib.nullcontext)
    _module("vllm.utils.math_utils",
            next_power_of_2=lambda n: 1 if n < 1 else 1 << (int(n) - 1).bit_length(),
            cdiv=lambda a, b: -(a // -b))
    _module("vllm.utils.platform_utils", num_compute_units=platform.num_compute_units)
    pkg.envs, pkg.platforms, pkg.triton_utils, pkg.utils = (
        envs, sys.modules["vllm.platforms"], sys.modules["vllm.triton_utils"], utils)


def _trees():
    """(version, folder) of each vLLM tree under .vllm/, in the order to try."""
    order = []
    try:
        with open(os.path.join(ROOT, "ORDER")) as f:
            order = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        pass
    trees = [(v, os.path.join(ROOT, v)) for v in order if os.path.isdir(os.path.join(ROOT, v))]
    if os.path.isdir(os.path.join(ROOT, "vllm")):  # a single tree directly in .vllm/
        trees.append((_read(os.path.join(ROOT, "VERSION")) or "unknown", ROOT))
    return trees


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def version():
    """The vLLM release(s) the loaded peers came from."""
    if LOADED:
        return ", ".join(f"{k} {v}" for k, v in sorted(LOADED.items()))
    return "/".join(v for v, _ in _trees()) or "none"


def _load(rel, name, smoke, peer):
    if peer not in _CACHE:
        _CACHE[peer] = _load_once(rel, name, smoke, peer)
    return _CACHE[peer]


def _load_once(rel, name, smoke, peer):
    trees = [(v, t) for v, t in _trees() if os.path.exists(os.path.join(t, rel))]
    if not trees:
        return None, f"{rel} not found under .vllm/ (run scripts/prep-peers.sh and copy .vllm to the GPU machine)"
    why = []
    for ver, tree in trees:
        try:
            _stubs(tree)
            mod = importlib.import_module(name)
            adapter = smoke(mod)
            LOADED[peer] = ver
            return adapter, ""
        except Exception as e:  # missing imports of the vLLM tree, API or Triton drift
            why.append(f"vllm {ver}: {type(e).__name__}: {str(e)[:200]}")
    return None, f"{rel}: " + "; ".join(why)


def _gpu():
    import torch
    return torch.cuda.is_available()


class Gumbel:
    """gumbel_sample(logits, idx_mapping, temperature, seed, pos, apply_temperature, ...) across
    releases (is_drafting appeared in later ones)."""

    def __init__(self, mod):
        self.fn = mod.gumbel_sample
        self.drafting = "is_drafting" in inspect.signature(self.fn).parameters

    def __call__(self, x, idx, temp, seeds, pos, use_fp64=False):
        kw = {"is_drafting": False} if self.drafting else {}
        return self.fn(x, idx, temp, seeds, pos, True, use_fp64=use_fp64, **kw)


class Qrita:
    """apply_top_k_top_p_triton(logits, k, p) (masks float32 logits, in place where it can)."""

    def __init__(self, mod):
        self.fn = mod.apply_top_k_top_p_triton
        self.topp_only = "has_topp_only_rows" in inspect.signature(self.fn).parameters

    def __call__(self, y, k, p):
        kw = {"has_topp_only_rows": k is None} if (self.topp_only and p is not None) else {}
        return self.fn(y, k, p, **kw)


def load_gumbel():
    def smoke(mod):
        g = Gumbel(mod)
        if _gpu():
            import torch
            x = torch.randn(4, 1025, device="cuda")
            x[:, 7] += 100.0  # one token holds all the mass: it must be drawn
            r = torch.arange(4, dtype=torch.int32, device="cuda")
            for fp64 in (False, True):
                t = g(x, r, torch.ones(4, device="cuda"), r.long(),
                      torch.zeros(4, dtype=torch.int64, device="cuda"), use_fp64=fp64)
                if not bool((t == 7).all()):
                    raise RuntimeError(f"smoke test drew {t.tolist()}, expected token 7")
        return g

    return _load(GUMBEL, "vllm.v1.worker.gpu.sample.gumbel", smoke, "gumbel")


def load_qrita():
    def smoke(mod):
        q = Qrita(mod)
        if _gpu():
            import torch
            x = torch.randn(4, 1025, device="cuda")
            k = torch.full((4,), 5, dtype=torch.int32, device="cuda")
            y = q(x.clone(), k, None)
            kept = torch.isfinite(y).sum(-1)
            if not bool((kept == 5).all()):
                raise RuntimeError(f"smoke test top-k 5 kept {kept.tolist()}")
            p = torch.full((4,), 0.5, dtype=torch.float32, device="cuda")
            y = q(x.clone(), None, p)
            kept = torch.isfinite(y).sum(-1)
            if not bool(((kept >= 1) & (kept < 1025)).all()):
                raise RuntimeError(f"smoke test top-p 0.5 kept {kept.tolist()}")
        return q

    return _load(QRITA, "vllm.v1.sample.ops.topk_topp_triton", smoke, "Qrita")
