"""FlashInfer's sampling kernels, loaded at run time from the ignored folder .fi/ (never committed).

scripts/prep-peers.sh fills .fi/ from pinned PyPI releases: the Python files that
flashinfer.sampling and flashinfer.topk import (with a minimal package initialiser), their two
JIT modules built ahead for sm_90a and placed where FlashInfer looks for ahead-of-time builds
(flashinfer/data/aot/NAME/NAME.so), and apache-tvm-ffi for CPython 3.12 in .fi/site. So nothing
is compiled on the GPU machine and the whole folder is a few MiB (the full wheel is 101 MB).

load() returns (flashinfer.sampling, "") or (None, reason); the runner then skips FlashInfer and
says why.
"""
import os
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".fi"))
# The same folder packed (tar + xz, about half the size) for a GPU machine short of room for the folder:
# unpacked in place at the first load when .fi/ itself is absent.
PACKED = ROOT + ".tar.xz"
_CACHE = {}
STATE = {"topk": False}  # whether the top-k module (radix top-k fast path) loaded too


def version():
    try:
        with open(os.path.join(ROOT, "VERSION")) as f:
            return f.readline().strip()
    except OSError:
        return "unknown"


def load():
    if "r" in _CACHE:
        return _CACHE["r"]
    _CACHE["r"] = _load()
    return _CACHE["r"]


def _unpack():
    if os.path.isdir(ROOT) or not os.path.exists(PACKED):
        return
    import tarfile
    with tarfile.open(PACKED, "r:xz") as t:
        members = [m for m in t.getmembers() if m.name == ".fi" or m.name.startswith(".fi/")]
        kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        t.extractall(os.path.dirname(ROOT), members=members, **kw)


def _load():
    try:
        _unpack()
    except Exception as e:
        return None, f"{PACKED} did not unpack: {type(e).__name__}: {e}"
    aot = os.path.join(ROOT, "flashinfer", "data", "aot")
    if not (os.path.isdir(os.path.join(ROOT, "flashinfer"))
            and os.path.exists(os.path.join(aot, "sampling", "sampling.so"))):
        return None, (".fi/ has no prebuilt FlashInfer sampling module: run scripts/prep-peers.sh "
                      "here and copy .fi (or .fi.tar.xz) to the GPU machine")
    site = os.path.join(ROOT, "site")
    abi = "core.cpython-%d%d-" % sys.version_info[:2]
    paths = [ROOT]
    tdir = os.path.join(site, "tvm_ffi")
    if os.path.isdir(tdir) and any(f.startswith(abi) for f in os.listdir(tdir)):
        paths.insert(0, site)  # apache-tvm-ffi built for this Python (else: an installed one)
    for p in paths:
        if p not in sys.path:
            sys.path.insert(0, p)
    # FlashInfer's lock files and (unused) JIT cache go to a scratch folder; never compile here:
    # a module missing from .fi/ fails at once instead of starting nvcc on the GPU machine.
    ws = tempfile.mkdtemp(prefix="dds-fi-")
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", ws)
    os.environ.setdefault("TVM_FFI_CACHE_DIR", os.path.join(ws, "tvm-ffi"))
    os.environ.setdefault("FLASHINFER_DISABLE_JIT", "1")
    try:
        import flashinfer.sampling as fs
        # Load the module now, so that a broken build is reported as a load failure, not as a
        # failure of the first timed call.
        fs.get_sampling_module()
    except Exception as e:
        return None, f"FlashInfer from .fi/ did not load: {type(e).__name__}: {str(e)[:300]}"
    # The top-k module serves top_k_top_p_sampling_from_logits's fast path (integer k <= 256,
    # V >= 65536); without it the runner passes k per row, which takes the general path.
    if os.path.exists(os.path.join(aot, "topk", "topk.so")):
        try:
            import flashinfer.topk as ft
            ft.get_topk_module()
            STATE["topk"] = True
        except Exception as e:
            print(f"FlashInfer top-k module did not load: {type(e).__name__}: {str(e)[:200]}")
    return fs, ""
