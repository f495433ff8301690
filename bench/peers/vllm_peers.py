"""vLLM's own sampling kernels, loaded at run time from files of a vLLM checkout placed in the
ignored folder .vllm/ (never committed). Each loader returns None and a reason when the file or
its imports are missing, and the runner then skips that peer and says so.

- vLLM model-runner-v2 Gumbel sampler: .vllm/vllm/v1/worker/gpu/sample/gumbel.py
- vLLM's default top-k/top-p Triton sampler (Qrita): .vllm/vllm/v1/sample/ops/topk_topp_triton.py

The vLLM modules import `vllm.triton_utils`; a stand-in module with the same four names
(HAS_TRITON, tl, tldevice, triton) is created here, since the rest of vLLM is not installed.
"""
import importlib.util
import os
import sys
import types

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".vllm")


def _stub_triton_utils():
    if "vllm.triton_utils" in sys.modules:
        return
    import triton
    import triton.language as tl
    try:
        from triton.language.extra import libdevice as tldevice
    except Exception:  # older Triton
        tldevice = tl.math
    pkg = sys.modules.setdefault("vllm", types.ModuleType("vllm"))
    pkg.__path__ = []
    mod = types.ModuleType("vllm.triton_utils")
    mod.HAS_TRITON, mod.tl, mod.tldevice, mod.triton = True, tl, tldevice, triton
    sys.modules["vllm.triton_utils"] = mod


def _load(rel, name):
    path = os.path.join(ROOT, rel)
    if not os.path.exists(path):
        return None, f"{rel} not found under .vllm/ (bring it with the fetch tool)"
    try:
        _stub_triton_utils()
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod, ""
    except Exception as e:  # missing imports of the vLLM tree, API drift
        return None, f"{rel}: {type(e).__name__}: {e}"


def load_gumbel():
    return _load("vllm/v1/worker/gpu/sample/gumbel.py", "vllm_gumbel")


def load_qrita():
    return _load("vllm/v1/sample/ops/topk_topp_triton.py", "vllm_topk_topp_triton")
