"""Array adapters: numpy (host), torch (host or CUDA), CuPy and other CUDA arrays.

Everything dds needs from an array is a pointer, a shape, strides in elements, a dtype and a
device. This module reads them without importing torch or CuPy unless the caller's objects
come from them, and without copying anything large.
"""

from __future__ import annotations

import contextlib
import numbers
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._dds import dds_py_address as _address

try:  # numpy has no bfloat16; ml_dtypes (from JAX) adds one.
    import ml_dtypes as _ml_dtypes  # type: ignore

    NP_BFLOAT16: Optional[np.dtype] = np.dtype(_ml_dtypes.bfloat16)
except Exception:  # pragma: no cover - depends on the environment
    NP_BFLOAT16 = None

HOST = None  # ArrayInfo.device for host memory

# dds dtype names -> C enum values (DDS_DTYPE_*)
DTYPE_CODES = {"float32": 0, "bfloat16": 1, "float16": 2}
_DTYPE_ALIASES = {
    "f32": "float32", "float32": "float32", "float": "float32", "fp32": "float32",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "f16": "float16", "float16": "float16", "half": "float16", "fp16": "float16",
}

_TYPESTR = {
    "f4": "float32", "f2": "float16", "f8": "float64",
    "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
    "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64", "b1": "bool",
}
_ITEMSIZE = {
    "float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "int16": 2, "int32": 4,
    "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
}


def dtype_name(dtype: Any) -> str:
    """Canonical dds name of a logits / probs dtype given as a string, numpy, torch dtype."""
    if dtype is None:
        raise TypeError("dtype is None")
    if isinstance(dtype, str):
        key = dtype.lower()
        if key.startswith("torch."):
            key = key[6:]
    else:
        key = str(dtype).lower()
        if key.startswith("torch."):
            key = key[6:]
        elif not isinstance(dtype, np.dtype):
            try:
                key = np.dtype(dtype).name
            except TypeError:
                pass
    if key not in _DTYPE_ALIASES:
        raise TypeError(f"unknown dtype {dtype!r}: use 'float32', 'bfloat16' or 'float16'")
    return _DTYPE_ALIASES[key]


class ArrayInfo:
    """What dds reads from an array (a slotted class: one is made per array per call)."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "device", "lib", "obj")

    def __init__(self, ptr: int, shape: Tuple[int, ...], strides: Tuple[int, ...], dtype: str,
                 device: Optional[int], lib: str, obj: Any) -> None:
        self.ptr = ptr
        self.shape = shape
        self.strides = strides  # in elements
        self.dtype = dtype  # canonical name: float32, bfloat16, int32, uint64, ... or the lib's own
        self.device = device  # None: host memory; >= 0: CUDA ordinal; -1: CUDA, ordinal unknown
        self.lib = lib  # "numpy" | "torch" | "cupy" | "cuda" (other __cuda_array_interface__)
        self.obj = obj  # the array (kept alive by the caller while the call runs)

    @property
    def on_host(self) -> bool:
        return self.device is None

    def is_contiguous_1d(self) -> bool:
        return len(self.shape) == 1 and (self.shape[0] <= 1 or self.strides[0] == 1)

    def where(self) -> str:
        return "host memory" if self.device is None else (
            "a CUDA device" if self.device < 0 else f"CUDA device {self.device}")


# torch.Tensor and torch dtype -> name, filled when torch is first seen (never imported here).
_TORCH_TENSOR: Any = None
_TORCH_DTYPES: Dict[Any, str] = {}


def torch_tensor_type() -> Any:
    """torch.Tensor if torch is loaded (None otherwise); caches the dtype names on first use."""
    global _TORCH_TENSOR
    if _TORCH_TENSOR is None:
        torch = sys.modules.get("torch")
        if torch is None or not hasattr(torch, "Tensor"):
            return None
        for name in ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32",
                     "int64", "uint8", "uint16", "uint32", "uint64", "bool"):
            dt = getattr(torch, name, None)
            if dt is not None:
                _TORCH_DTYPES[dt] = name
        _TORCH_TENSOR = torch.Tensor
    return _TORCH_TENSOR


def _is_torch_tensor(obj: Any) -> bool:
    t = _TORCH_TENSOR if _TORCH_TENSOR is not None else torch_tensor_type()
    return t is not None and isinstance(obj, t)


def _torch_dtype_name(dt: Any) -> str:
    name = _TORCH_DTYPES.get(dt)
    return name if name is not None else str(dt).replace("torch.", "")


def _describe_torch(obj: Any, name: str) -> ArrayInfo:
    if obj.is_cuda:
        device: Optional[int] = obj.get_device()
    elif obj.is_cpu:
        device = HOST
    else:
        raise TypeError(f"{name}: torch tensor on device '{obj.device}' is not supported "
                        "(dds takes CPU tensors on the cpu backend, CUDA tensors on cuda)")
    return ArrayInfo(obj.data_ptr(), tuple(obj.shape), obj.stride(),
                     _torch_dtype_name(obj.dtype), device, "torch", obj)


def describe(obj: Any, name: str) -> Optional[ArrayInfo]:
    """ArrayInfo of an array object, or None if `obj` is not an array this module knows."""
    if type(obj) is np.ndarray:
        return _describe_numpy(obj, name)
    if _is_torch_tensor(obj):
        return _describe_torch(obj, name)
    if isinstance(obj, np.ndarray):
        return _describe_numpy(obj, name)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _describe_cai(obj, cai, name)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        dev_type, _ = obj.__dlpack_device__()
        if int(dev_type) == 1:  # kDLCPU
            return _describe_numpy(np.from_dlpack(obj), name)
        if int(dev_type) in (2, 13):  # kDLCUDA, kDLCUDAManaged
            if "torch" in sys.modules or _importable("torch"):
                import torch

                return describe(torch.from_dlpack(obj), name)
            if _importable("cupy"):
                import cupy

                return describe(cupy.from_dlpack(obj), name)
        raise TypeError(f"{name}: DLPack device type {dev_type} is not supported")
    if hasattr(obj, "__array_interface__"):
        return _describe_numpy(np.asarray(obj), name)
    return None


_NP_NAMES: Dict[Any, str] = {}


def _np_name(dt: np.dtype) -> str:
    name = _NP_NAMES.get(dt)
    if name is None:
        name = dt.name
        if NP_BFLOAT16 is not None and dt == NP_BFLOAT16:
            name = "bfloat16"
        _NP_NAMES[dt] = name
    return name


def _np_address(a: np.ndarray) -> int:
    try:
        return _address(a)
    except Exception:  # pragma: no cover - dtypes without buffer support
        return int(a.__array_interface__["data"][0])


def _describe_numpy(a: np.ndarray, name: str) -> ArrayInfo:
    dt = a.dtype
    item = dt.itemsize
    bs = a.strides
    if len(bs) == 1:
        st: Tuple[int, ...] = (bs[0] // item,)
        bad = st[0] * item != bs[0]
    else:
        st = tuple([s // item for s in bs])
        bad = item > 1 and any(s * item != b for s, b in zip(st, bs))
    if bad:
        raise ValueError(f"{name}: strides {bs} bytes are not a multiple of the element "
                         f"size {item}")
    nm = _NP_NAMES.get(dt)
    return ArrayInfo(_np_address(a), a.shape, st, nm if nm is not None else _np_name(dt), HOST,
                     "numpy", a)


def _describe_cai(obj: Any, cai: Dict[str, Any], name: str) -> ArrayInfo:
    if cai.get("mask") is not None:
        raise TypeError(f"{name}: masked CUDA arrays are not supported")
    typestr = cai["typestr"]
    dt = _TYPESTR.get(typestr[1:], typestr)
    item = int(typestr[2:]) if typestr[2:].isdigit() else _ITEMSIZE.get(dt, 1)
    shape = tuple(int(s) for s in cai["shape"])
    if cai.get("strides") is None:
        strides: List[int] = []
        acc = 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= max(s, 1)
        st = tuple(reversed(strides))
    else:
        bs = tuple(int(s) for s in cai["strides"])
        if any(s % item for s in bs):
            raise ValueError(f"{name}: strides {bs} bytes are not a multiple of the element "
                             f"size {item}")
        st = tuple(s // item for s in bs)
    mod = type(obj).__module__ or ""
    lib = "cupy" if mod.startswith("cupy") else "cuda"
    device = -1
    dev = getattr(obj, "device", None)
    if lib == "cupy" and dev is not None:
        device = int(getattr(dev, "id", -1))
    return ArrayInfo(int(cai["data"][0] or 0), shape, st, dt, device, lib, obj)


_IMPORTABLE: Dict[str, bool] = {}


def _importable(mod: str) -> bool:
    if mod not in _IMPORTABLE:
        try:
            __import__(mod)
            _IMPORTABLE[mod] = True
        except Exception:
            _IMPORTABLE[mod] = False
    return _IMPORTABLE[mod]


_PY_SCALARS = (int, float)


def is_scalar(x: Any) -> bool:
    return (type(x) in _PY_SCALARS or isinstance(x, numbers.Number) or
            (isinstance(x, np.ndarray) and x.ndim == 0))


def is_host_sequence(x: Any) -> bool:
    return isinstance(x, (list, tuple, range))


# ------------------------------------------------------------------------------------------------
# Per-call context: which backend, which array library allocates outputs, which stream.
# ------------------------------------------------------------------------------------------------
class CallContext:
    """State of one sample / stash call: keeps temporaries alive and knows where to allocate."""

    def __init__(self, backend: str, device: int, lib: str, stream: Any, stream_given: bool):
        self.backend = backend  # "cpu" | "cuda"
        self.device = device
        self.lib = lib  # allocation library: numpy | torch | cupy
        self.keep: List[Any] = []
        self.stream = stream  # int (cudaStream_t) on cuda, 0 on cpu
        self.stream_given = stream_given
        self._stream_obj: Any = None

    # -- allocation -------------------------------------------------------------------------
    def _torch_stream_ctx(self) -> Any:
        import torch

        if not self.stream_given:
            return contextlib.nullcontext()
        if self._stream_obj is None:
            self._stream_obj = torch.cuda.ExternalStream(self.stream, device=self.device)
        return torch.cuda.stream(self._stream_obj)

    def _cupy_stream_ctx(self) -> Any:
        import cupy

        if not self.stream_given:
            return contextlib.nullcontext()
        if self._stream_obj is None:
            self._stream_obj = cupy.cuda.ExternalStream(self.stream, self.device)
        return self._stream_obj

    def empty(self, shape: Tuple[int, ...], dtype: str, fill: Any = None) -> Any:
        """A new output array of the context's library (on the sampler's device for cuda)."""
        if self.lib == "numpy":
            npdt = _numpy_dtype(dtype)
            return np.empty(shape, npdt) if fill is None else np.full(shape, fill, npdt)
        if self.lib == "torch":
            import torch

            tdt = getattr(torch, dtype)
            if self.backend == "cuda":
                dev: Any = torch.device("cuda", self.device)
                if self.stream_given:
                    with self._torch_stream_ctx():
                        if fill is None:
                            return torch.empty(shape, dtype=tdt, device=dev)
                        return torch.full(shape, fill, dtype=tdt, device=dev)
            else:
                dev = "cpu"
            if fill is None:
                return torch.empty(shape, dtype=tdt, device=dev)
            return torch.full(shape, fill, dtype=tdt, device=dev)
        if self.lib == "cupy":
            import cupy

            if dtype == "bfloat16":
                raise TypeError("CuPy has no bfloat16: pass out_probs as a torch bfloat16 tensor "
                                "or a uint16 CuPy array with probs_dtype='bfloat16'")
            with cupy.cuda.Device(self.device), self._cupy_stream_ctx():
                if fill is None:
                    return cupy.empty(shape, dtype=dtype)
                return cupy.full(shape, fill, dtype=dtype)
        raise TypeError(f"cannot allocate outputs with {self.lib}")  # pragma: no cover

    def upload(self, host: np.ndarray) -> Any:
        """Copies a small host array (per-request parameters) to the sampler's device."""
        if self.lib == "torch":
            import torch

            host = np.ascontiguousarray(host)
            # torch before 2.3 has no uint64 / uint32: move the same bits as int64 / int32.
            if host.dtype == np.uint64:
                host = host.view(np.int64)
            elif host.dtype == np.uint32:
                host = host.view(np.int32)
            with self._torch_stream_ctx():
                return torch.from_numpy(host).to(torch.device("cuda", self.device))
        if self.lib == "cupy":
            import cupy

            with cupy.cuda.Device(self.device), self._cupy_stream_ctx():
                return cupy.asarray(host)
        raise TypeError(f"cannot copy host arrays to the device with {self.lib}")  # pragma: no cover


def _numpy_dtype(dtype: str) -> Any:
    if dtype == "bfloat16":
        return NP_BFLOAT16 if NP_BFLOAT16 is not None else np.uint16
    return np.dtype(dtype)


def alloc_lib_for(info: ArrayInfo, backend: str) -> str:
    """The library that allocates outputs for a call whose logits are `info`."""
    if info.lib in ("numpy", "torch", "cupy"):
        return info.lib
    for mod in ("cupy", "torch"):
        if mod in sys.modules or _importable(mod):
            return mod
    raise TypeError("outputs must be allocated on the device but neither CuPy nor torch is "
                    "importable: pass every out_* array")


def resolve_stream(stream: Any, lib: str, device: int) -> Tuple[int, bool]:
    """(cudaStream_t as int, given explicitly?) for a CUDA call."""
    if stream is not None:
        if isinstance(stream, numbers.Integral):
            return int(stream), True
        for attr in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, others
            v = getattr(stream, attr, None)
            if isinstance(v, numbers.Integral):
                return int(v), True
        raise TypeError(f"stream: expected an int (cudaStream_t), a torch.cuda.Stream or a "
                        f"cupy.cuda.Stream, got {type(stream).__name__}")
    if lib == "torch":
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # no Stream object made
        if raw is not None:
            return raw(device), False
        return int(torch.cuda.current_stream(device).cuda_stream), False
    if lib == "cupy":
        import cupy

        with cupy.cuda.Device(device):
            return int(cupy.cuda.get_current_stream().ptr), False
    return 0, False


# ------------------------------------------------------------------------------------------------
# Checks
# ------------------------------------------------------------------------------------------------
def check_device(info: ArrayInfo, name: str, ctx: CallContext) -> None:
    if ctx.backend == "cpu":
        if not info.on_host:
            raise TypeError(f"{name}: is in {info.where()} but the sampler's backend is 'cpu' "
                            "(pass host arrays: numpy or CPU tensors)")
    else:
        if info.on_host:
            raise TypeError(f"{name}: is in host memory but the sampler's backend is 'cuda' "
                            f"(pass a CUDA tensor / CuPy array on device {ctx.device})")
        if info.device is not None and info.device >= 0 and info.device != ctx.device:
            raise ValueError(f"{name}: is on CUDA device {info.device} but the sampler uses "
                             f"device {ctx.device}")


def matrix(obj: Any, name: str, ctx: CallContext, cols: int, dtypes: Sequence[str],
           dtype_override: Optional[str], rows: Optional[int] = None,
           override_name: str = "dtype",
           info: Optional[ArrayInfo] = None,
           cols_what: Optional[str] = None) -> Tuple[ArrayInfo, str, int]:
    """A [rows, cols] matrix with unit column stride. Returns (info, dds dtype, row stride)."""
    if info is None:
        info = describe(obj, name)
    if info is None:
        raise TypeError(f"{name}: expected a 2-D array (numpy / torch / CuPy), got "
                        f"{type(obj).__name__}")
    check_device(info, name, ctx)
    if len(info.shape) != 2:
        raise ValueError(f"{name}: expected a 2-D array [rows, vocab], got shape {info.shape}")
    if info.shape[1] != cols:
        what = cols_what or "the sampler's vocab_size"
        raise ValueError(f"{name}: has {info.shape[1]} columns but {what} is {cols}")
    if rows is not None and info.shape[0] != rows:
        raise ValueError(f"{name}: has {info.shape[0]} rows, expected {rows}")
    dt = info.dtype
    if dtype_override is not None:
        want = dtype_name(dtype_override)
        if dt in ("uint16", "int16") and want in ("bfloat16", "float16"):
            dt = want  # raw 16-bit words, interpreted as the dtype the caller names
        elif dt != want:
            raise TypeError(f"{name}: array dtype {info.dtype} does not match "
                            f"{override_name}={dtype_override!r}")
    if dt not in dtypes:
        hint = ""
        if dt in ("uint16", "int16"):
            hint = f" (raw 16-bit words: pass {override_name}='bfloat16' or 'float16')"
        raise TypeError(f"{name}: dtype {info.dtype} is not supported: use "
                        f"{', '.join(dtypes)}{hint}")
    nrows = info.shape[0]
    if nrows > 0 and cols > 1 and info.strides[1] != 1:
        raise ValueError(f"{name}: column stride must be 1 (rows contiguous), got strides "
                         f"{info.strides} elements")
    row_stride = info.strides[0] if nrows > 1 else cols
    if row_stride < cols:
        raise ValueError(f"{name}: row stride {info.strides[0]} elements is smaller than the "
                         f"row length {cols} (rows overlap or run backwards)")
    return info, dt, row_stride


_INT_LIMITS = {
    "int32": (-(2 ** 31), 2 ** 31 - 1),
    "uint32": (0, 2 ** 32 - 1),
    "uint64": (0, 2 ** 64 - 1),
    "uint8": (0, 255),
}


def host_convert(value: Any, name: str, dtype: str) -> np.ndarray:
    """A host list / numpy array / CPU tensor as a contiguous numpy array of `dtype`, with the
    values checked (integers in range, no fractional values for integer dtypes)."""
    if _is_torch_tensor(value):
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    if dtype in _INT_LIMITS and is_host_sequence(value):
        # Lists are small: check in Python (np.asarray would turn [1, 2**63] into float64).
        flat = list(_flatten(value))
        lo, hi = _INT_LIMITS[dtype]
        for v in flat:
            if not isinstance(v, numbers.Integral):
                raise TypeError(f"{name}: expected integers for a {dtype} array, got "
                                f"{type(v).__name__} {v!r}")
            if not lo <= int(v) <= hi:
                raise ValueError(f"{name}: values must be in [{lo}, {hi}] ({dtype}); got {v}")
        shape = np.shape(np.empty(0) if not flat else np.asarray(value, dtype=object))
        return np.array([int(v) for v in flat], dtype=dtype).reshape(shape)
    try:
        a = np.asarray(value)
    except Exception as e:  # pragma: no cover
        raise TypeError(f"{name}: cannot convert {type(value).__name__} to an array: {e}")
    if a.dtype == object:
        raise TypeError(f"{name}: expected numbers, got {type(value).__name__} of objects")
    if dtype in _INT_LIMITS:
        if a.size and a.dtype.kind == "b":
            a = a.astype(np.int64)
        if a.size and a.dtype.kind not in "iu":
            raise TypeError(f"{name}: expected integers for a {dtype} array, got dtype "
                            f"{a.dtype}")
        lo, hi = _INT_LIMITS[dtype]
        if a.size:
            amin, amax = int(a.min()), int(a.max())
            if amin < lo or amax > hi:
                raise ValueError(f"{name}: values must be in [{lo}, {hi}] ({dtype}); got "
                                 f"{amin if amin < lo else amax}")
        return np.ascontiguousarray(a.astype(dtype, copy=False))
    if a.size and a.dtype.kind not in "biuf":
        raise TypeError(f"{name}: expected real numbers, got dtype {a.dtype}")
    return np.ascontiguousarray(a.astype(dtype, copy=False))


def _flatten(value: Any) -> Any:
    for v in value:
        if is_host_sequence(v):
            yield from _flatten(v)
        else:
            yield v


def vector(value: Any, name: str, ctx: CallContext, dtype: str, length: Optional[int],
           alt_dtypes: Sequence[str] = ()) -> Tuple[int, ArrayInfo]:
    """A 1-D array of `length` elements of `dtype` in the backend's memory. Host data is
    converted with range checks (and on the cuda backend copied to the device) for
    convenience; device arrays must already have `dtype` or one of `alt_dtypes` (same bits).
    Returns (pointer, info)."""
    info = describe(value, name) if not is_host_sequence(value) else None
    if info is None or info.on_host:
        if info is not None and ctx.backend == "cpu" and info.is_contiguous_1d() and (
                info.dtype == dtype or (dtype == "uint8" and info.dtype == "bool")):
            arr_info = info  # zero-copy: the caller's host array (else converted, checked)
        else:
            if info is None and not is_host_sequence(value):
                raise TypeError(f"{name}: expected an array or a list, got "
                                f"{type(value).__name__}")
            host = host_convert(value, name, dtype)
            if host.ndim != 1:
                raise ValueError(f"{name}: expected a 1-D array, got shape {host.shape}")
            if ctx.backend == "cpu":
                arr_info = _describe_numpy(host, name)
                ctx.keep.append(host)
            else:
                if length is not None and host.shape[0] != length:
                    raise ValueError(f"{name}: has {host.shape[0]} elements, expected {length}")
                dev = ctx.upload(host)
                ctx.keep.append(dev)
                arr_info = describe(dev, name)  # type: ignore[assignment]
                assert arr_info is not None
    else:
        check_device(info, name, ctx)
        if info.dtype != dtype and info.dtype not in alt_dtypes:
            raise TypeError(f"{name}: device array dtype must be {dtype}, got {info.dtype}")
        arr_info = info
    if len(arr_info.shape) != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {arr_info.shape}")
    if length is not None and arr_info.shape[0] != length:
        raise ValueError(f"{name}: has {arr_info.shape[0]} elements, expected {length}")
    if not arr_info.is_contiguous_1d():
        raise ValueError(f"{name}: must be contiguous (stride 1), got stride "
                         f"{arr_info.strides[0]}")
    ctx.keep.append(arr_info.obj)  # alive until the call is queued
    return arr_info.ptr, arr_info


def allowed_masks(value: Any, ctx: CallContext, num_requests: int,
                  vocab_size: int) -> Tuple[int, int]:
    """The `allowed_token_masks` keyword: packed bitmasks, 32 token ids per int32 word (bit
    t % 32 of word t // 32; xgrammar's layout), as [num_requests, words] or, for one request,
    [words], with words >= ceil(vocab_size / 32); int32 (uint32 on the host is taken bit for
    bit). Host data is copied to the device on cuda. Returns (pointer, allowed_mask_stride)."""
    name = "allowed_token_masks"
    words = (vocab_size + 31) // 32
    info = describe(value, name) if not is_host_sequence(value) else None
    if info is None or info.on_host:
        if info is None and not is_host_sequence(value):
            raise TypeError(f"{name}: expected an int32 array [num_requests, words] or a list, "
                            f"got {type(value).__name__}")
        if info is not None and info.lib == "numpy" and info.dtype == "uint32":
            host = np.ascontiguousarray(value).view(np.int32)
        else:
            host = np.ascontiguousarray(host_convert(value, name, "int32"))
        if host.ndim == 1:
            host = host.reshape(1, -1)
        if host.ndim != 2:
            raise ValueError(f"{name}: expected shape [num_requests, words] or [words], got "
                             f"{host.shape}")
        if ctx.backend == "cpu":
            info = _describe_numpy(host, name)
        else:
            dev = ctx.upload(host.reshape(-1))
            ctx.keep.append(dev)
            dinfo = describe(dev, name)
            assert dinfo is not None
            info = ArrayInfo(dinfo.ptr, host.shape, (host.shape[1], 1), "int32", dinfo.device,
                             dinfo.lib, dev)
    else:
        check_device(info, name, ctx)
        if info.dtype != "int32":
            raise TypeError(f"{name}: device array dtype must be int32, got {info.dtype}")
        if len(info.shape) == 1:
            info = ArrayInfo(info.ptr, (1, info.shape[0]), (info.shape[0], info.strides[0]),
                             info.dtype, info.device, info.lib, info.obj)
        if len(info.shape) != 2:
            raise ValueError(f"{name}: expected shape [num_requests, words] or [words], got "
                             f"{info.shape}")
    rows, cols = info.shape
    if rows != num_requests:
        raise ValueError(f"{name}: has {rows} rows, expected num_requests = {num_requests}")
    if cols < words:
        raise ValueError(f"{name}: has {cols} words per request, expected >= ceil(vocab_size / "
                         f"32) = {words}")
    if cols > 1 and info.strides[1] != 1:
        raise ValueError(f"{name}: words must be contiguous (column stride 1), got strides "
                         f"{info.strides}")
    stride = info.strides[0] if rows > 1 else cols
    if stride < cols:
        raise ValueError(f"{name}: row stride {stride} words is smaller than the row length "
                         f"{cols}")
    ctx.keep.append(info.obj)  # alive until the call is queued
    return info.ptr, stride


def out_vector(value: Any, name: str, ctx: CallContext, dtype: str, length: int,
               alt_dtypes: Sequence[str] = ()) -> ArrayInfo:
    """A caller-given output vector: right memory, dtype, length, contiguous; never converted."""
    info = describe(value, name)
    if info is None:
        raise TypeError(f"{name}: expected an array, got {type(value).__name__}")
    check_device(info, name, ctx)
    if info.dtype != dtype and info.dtype not in alt_dtypes:
        raise TypeError(f"{name}: dtype must be {dtype}, got {info.dtype}")
    if len(info.shape) != 1 or info.shape[0] != length:
        raise ValueError(f"{name}: expected shape ({length},), got {info.shape}")
    if not info.is_contiguous_1d():
        raise ValueError(f"{name}: must be contiguous (stride 1), got stride {info.strides[0]}")
    _check_writable(info, name)
    return info


_NP_DTYPES = {n: np.dtype(n) for n in ("int32", "float32", "uint8")}


def out_vector_ptr(value: Any, name: str, ctx: CallContext, dtype: str, length: int) -> int:
    """out_vector(...).ptr, with a fast path for the usual case (a writable contiguous numpy
    array or torch tensor of the right dtype, length and memory); anything else takes
    out_vector's checks, which raise naming `name`."""
    t = type(value)
    if t is np.ndarray:
        if (ctx.backend == "cpu" and value.dtype is _NP_DTYPES.get(dtype) and
                value.shape == (length,) and (length <= 1 or value.strides[0] ==
                                              value.itemsize) and value.flags.writeable):
            return _address(value)
    elif t is _TORCH_TENSOR:
        if (_TORCH_DTYPES.get(value.dtype) == dtype and value.shape == (length,) and
                (length <= 1 or value.stride(0) == 1) and
                ((value.get_device() == ctx.device) if ctx.backend == "cuda" else value.is_cpu)):
            return value.data_ptr()
    return out_vector(value, name, ctx, dtype, length).ptr


def out_block(value: Any, name: str, ctx: CallContext, dtype: str, count: int) -> ArrayInfo:
    """A caller-given C-contiguous output of `count` elements (any shape)."""
    info = describe(value, name)
    if info is None:
        raise TypeError(f"{name}: expected an array, got {type(value).__name__}")
    check_device(info, name, ctx)
    if info.dtype != dtype:
        raise TypeError(f"{name}: dtype must be {dtype}, got {info.dtype}")
    n = 1
    for s in info.shape:
        n *= s
    if n != count:
        raise ValueError(f"{name}: has {n} elements (shape {info.shape}), expected {count}")
    expect = 1
    for s, st in zip(reversed(info.shape), reversed(info.strides)):
        if s > 1 and st != expect:
            raise ValueError(f"{name}: must be C-contiguous, got strides {info.strides} elements")
        expect *= s
    _check_writable(info, name)
    return info


def _check_writable(info: ArrayInfo, name: str) -> None:
    if info.lib == "numpy" and not info.obj.flags.writeable:
        raise ValueError(f"{name}: array is read-only")
