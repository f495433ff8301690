"""The dds_sample_args of a Sampler.sample call, built from its keywords.

One builder serves Sampler.sample (into the sampler's reused args struct, reset by
dds_sample_args_init) and the vocabulary-parallel ShardCall (a struct of its own). The keywords
arrive as one dict (Sampler.sample's locals(), or sample_keywords() of a **kwargs call), so the
keyword list and its defaults live in Sampler.sample's signature only.

The per-call path is written for a low host cost: each array is described once, values equal to
the C defaults are skipped (the reset struct holds them), and outputs are validated and
addressed in one pass. A call that succeeded leaves a plan (make_plan): how each argument was
read and the args it produced. Sampler.sample hands its arguments to the C function
dds_py_sample_planned first, which runs the call when a plan matches every argument (same
array kinds, dtypes, shapes, strides and devices; the same non-numeric keywords) and patches
pointers and per-request scalars only; otherwise the full path here runs, with its checks and
messages, and records a plan.
"""

from __future__ import annotations

import numbers
import functools
import sys
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _arrays, _dds
from ._arrays import (DTYPE_CODES, ArrayInfo, CallContext, allowed_masks, describe,
                      dtype_name, matrix, out_vector_ptr, vector)

SAMPLE_OUTPUTS = ("tokens", "logprobs", "argmax", "confidence", "margin", "entropy", "probs",
                  "request_status")
LOGIT_DTYPES = ("float32", "bfloat16", "float16")
_STATS = {"processed": _dds.DDS_STATS_PROCESSED, "guided": _dds.DDS_STATS_GUIDED}

# Output vectors: (name, keyword, dtype, per request?); probs is a matrix, handled apart.
_OUT_VECTORS = (("tokens", "out_tokens", "int32", False),
                ("logprobs", "out_logprobs", "float32", False),
                ("argmax", "out_argmax", "int32", False),
                ("confidence", "out_confidence", "float32", False),
                ("margin", "out_margin", "float32", False),
                ("entropy", "out_entropy", "float32", False),
                ("request_status", "out_request_status", "int32", True))
_WANTED_CACHE: Dict[Any, frozenset] = {}


def check_int(value: Any, name: str, lo: int, hi: int) -> int:
    """`value` as an int in [lo, hi]; TypeError / ValueError naming `name` otherwise."""
    if value.__class__ is not int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
        value = int(value)
    if value < lo or value > hi:
        raise ValueError(f"{name}: {value} is outside [{lo}, {hi}]")
    return value


def check_float(value: Any, name: str) -> float:
    """`value` as a float; TypeError naming `name` if it is not a real number."""
    if value.__class__ is float:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a float, got {type(value).__name__}")
    return float(value)


def _check_i32(v: Any, n: str) -> int:
    return check_int(v, n, -(2 ** 31), 2 ** 31 - 1)


def _check_u64(v: Any, n: str) -> int:
    return check_int(v, n, 0, 2 ** 64 - 1)


def _check_u32(v: Any, n: str) -> int:
    return check_int(v, n, 0, 2 ** 32 - 1)


# Per-request values: (keyword = scalar field, array field, dtype, check, C default, accepted
# device dtypes of the same bits). Device seeds may be int64 and steps int32: torch's unsigned
# types are second-class; the library reads them as uint64 / uint32.
_REQUEST_PARAMS = (
    ("guidance_scale", "guidance_scales", "float32", check_float, 0.0, ()),
    ("temperature", "temperatures", "float32", check_float, 1.0, ()),
    ("top_k", "top_ks", "int32", _check_i32, 0, ()),
    ("top_p", "top_ps", "float32", check_float, 1.0, ()),
    ("min_p", "min_ps", "float32", check_float, 0.0, ()),
    ("seed", "seeds", "uint64", _check_u64, 0, ("int64",)),
    ("step", "steps", "uint32", _check_u32, 0, ("int32",)),
)


def wanted_outputs(outputs: Any) -> frozenset:
    """The set of output names of `outputs` (a name or an iterable of names), validated."""
    try:
        return _WANTED_CACHE[outputs]
    except (KeyError, TypeError):
        pass
    names = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    for o in names:
        if o not in SAMPLE_OUTPUTS:
            raise ValueError(f"outputs: unknown output {o!r}; choose from {SAMPLE_OUTPUTS}")
    w = frozenset(names)
    if isinstance(outputs, (str, tuple)) and len(_WANTED_CACHE) < 256:
        _WANTED_CACHE[outputs] = w
    return w


def _alloc_vector(ctx: CallContext, n: int, dt: str) -> Tuple[Any, int]:
    arr = ctx.empty((n,), dt)
    if ctx.lib == "torch":
        return arr, arr.data_ptr()
    info = describe(arr, "out")
    assert info is not None
    return arr, info.ptr


def build_sample_args(sampler: Any, shard_cols: Optional[int], logits: Any, kw: Dict[str, Any],
                      a: Any) -> Tuple[Dict[str, Any], CallContext]:
    """Fills `a` (a dds_sample_args holding the defaults of dds_sample_args_init) from the
    keywords `kw` of Sampler.sample for the whole row (shard_cols None) or a vocabulary slice of
    shard_cols columns (dds_shard.h); allocates the outputs asked for. Returns (outputs by name,
    call context); the context keeps temporaries alive until the call is queued."""
    linfo = describe(logits, "logits")
    if linfo is None:
        raise TypeError(f"logits: expected a 2-D array (numpy on the cpu backend, torch / "
                        f"CuPy on cuda), got {type(logits).__name__}")
    ctx = sampler._context(linfo, kw["stream"])
    cols = sampler.vocab_size if shard_cols is None else shard_cols
    what = None if shard_cols is None else "vocab_slice"
    dtype = kw["dtype"]
    linfo, ldt, row_stride = matrix(logits, "logits", ctx, cols, LOGIT_DTYPES, dtype,
                                    info=linfo, cols_what=what)
    num_rows = linfo.shape[0]
    ptr, R, _ = sampler._rows_and_requests("logits", num_rows, kw["row_offsets"], ctx)
    a.num_rows = num_rows
    a.logits = linfo.ptr
    if ldt != "float32":
        a.dtype = DTYPE_CODES[ldt]
    a.row_stride = row_stride
    if ptr:
        a.row_offsets = ptr
    a.num_requests = R if R > 1 else 1
    positions = kw["positions"]
    if positions is not None:
        a.positions = vector(positions, "positions", ctx, "int32", num_rows)[0]

    uncond_logits = kw["uncond_logits"]
    uncond_row_offsets = kw["uncond_row_offsets"]
    if uncond_logits is not None:
        uinfo, udt, ustride = matrix(uncond_logits, "uncond_logits", ctx, cols, LOGIT_DTYPES,
                                     dtype, cols_what=what)
        if udt != ldt:
            raise TypeError(f"uncond_logits: dtype {udt} differs from logits' {ldt} "
                            "(one dtype for both)")
        a.uncond_logits = uinfo.ptr
        a.uncond_row_stride = ustride
        a.uncond_num_rows = uinfo.shape[0]
        if uncond_row_offsets is not None:
            a.uncond_row_offsets = vector(uncond_row_offsets, "uncond_row_offsets", ctx,
                                          "int32", R)[0]
        elif uinfo.shape[0] < num_rows:
            raise ValueError(f"uncond_logits: has {uinfo.shape[0]} rows; without "
                             f"uncond_row_offsets it must mirror the {num_rows} logits rows")
    elif uncond_row_offsets is not None:
        raise ValueError("uncond_row_offsets: given without uncond_logits")

    for key, arr_field, dt, conv, default, alt in _REQUEST_PARAMS:
        v = kw[key]
        if v.__class__ is default.__class__ and v == default:
            continue  # the C default from dds_sample_args_init
        sampler._request_param(a, v, key, arr_field, key, dt, ctx, R, conv, alt)
    banned_token = kw["banned_token"]
    if banned_token is not None and not (banned_token.__class__ is int and banned_token == -1):
        a.banned_token = check_int(banned_token, "banned_token", -1, sampler.vocab_size - 1)
    masks = kw["allowed_token_masks"]
    if masks is not None:
        a.allowed_token_masks, a.allowed_mask_stride = allowed_masks(masks, ctx, R,
                                                                     sampler.vocab_size)
    stats = kw["stats"]
    if isinstance(stats, str):
        code = _STATS.get(stats.lower())
        if code is None:
            raise ValueError(f"stats: must be 'processed' or 'guided', got {stats!r}")
        a.stats = code
    else:
        a.stats = check_int(stats, "stats", 0, 1)

    # -- outputs --
    wanted = wanted_outputs(kw["outputs"])
    res: Dict[str, Any] = {}
    for key, kwname, dt, per_request in _OUT_VECTORS:
        arr = kw[kwname]
        n = R if per_request else num_rows
        if arr is not None:
            ptr = out_vector_ptr(arr, kwname, ctx, dt, n)
        elif key in wanted:
            arr, ptr = _alloc_vector(ctx, n, dt)
        else:
            continue
        res[key] = arr
        setattr(a, key, ptr)
    out_probs = kw["out_probs"]
    probs_dtype = kw["probs_dtype"]
    if out_probs is not None or "probs" in wanted:
        if out_probs is not None:
            pinfo, pdt, pstride = matrix(out_probs, "out_probs", ctx, cols, LOGIT_DTYPES,
                                         probs_dtype, rows=num_rows,
                                         override_name="probs_dtype", cols_what=what)
            if pinfo.lib == "numpy" and not pinfo.obj.flags.writeable:
                raise ValueError("out_probs: array is read-only")
            res["probs"] = out_probs
        else:
            pdt = dtype_name(probs_dtype) if probs_dtype is not None else "float32"
            res["probs"] = ctx.empty((num_rows, cols), pdt)
            pinfo = describe(res["probs"], "probs")  # type: ignore[assignment]
            pstride = cols
        a.probs = pinfo.ptr
        a.probs_dtype = DTYPE_CODES[pdt]
        a.probs_row_stride = pstride
    elif probs_dtype is not None:
        dtype_name(probs_dtype)  # validate the spelling even when unused
    if not res or (len(res) == 1 and "request_status" in res):
        raise ValueError("outputs: no output requested: name one of tokens, logprobs, "
                         "argmax, confidence, margin, entropy, probs (or pass an out_* "
                         "array)")
    return res, ctx


# -- plans (see the module docstring and dds.i's dds_py_sample_planned) -------------------------
# Sampler.sample's arguments in the order it passes them to dds_py_sample_planned (checked
# against its signature when dds._sampler is imported).
PLAN_SLOTS = ("logits", "row_offsets", "positions", "uncond_logits", "uncond_row_offsets",
              "guidance_scale", "temperature", "top_k", "top_p", "min_p", "seed", "step",
              "banned_token", "stats", "outputs", "dtype", "probs_dtype", "out_tokens",
              "out_logprobs", "out_argmax", "out_confidence", "out_margin", "out_entropy",
              "out_probs", "out_request_status", "stream", "allowed_token_masks")
MAX_PLANS = 4  # per sampler, most recently used first
_EQ, _TORCH, _NUMPY, _NUM = 0, 1, 2, 3  # slot kinds of dds.i
_F32, _I32, _U32, _U64 = 0, 1, 2, 3
_FIXED, _ROWS_DEF, _ROWS, _REQS_DEF, _REQS, _UNCOND_MIN, _UNCOND_ANY = range(7)  # of dds.i
_R, _Q = (_ROWS,), (_REQS,)
# argument -> (pointer field it may be passed in without a copy, dimension kinds, row stride
# field of a matrix)
_ARRAY_SLOTS = {"logits": ("logits", (_ROWS_DEF, _FIXED), "row_stride"),
                "row_offsets": ("row_offsets", (_REQS_DEF,), None),
                "positions": ("positions", _R, None),
                "uncond_logits": ("uncond_logits", (_UNCOND_MIN, _FIXED), "uncond_row_stride"),
                "uncond_row_offsets": ("uncond_row_offsets", _Q, None),
                **{p[0]: (p[1], _Q, None) for p in _REQUEST_PARAMS},
                **{"out_" + n: (n, _R, None) for n in SAMPLE_OUTPUTS},
                "out_probs": ("probs", (_ROWS, _FIXED), "probs_row_stride"),
                "out_request_status": ("request_status", _Q, None)}
_OUT_INDEX = {n: i for i, n in enumerate(SAMPLE_OUTPUTS)}
# per-request scalars -> (field, C type, lo, hi) with check_int's / check_float's rules
_NUM_SLOTS = {"guidance_scale": ("guidance_scale", _F32, 0, 0),
              "temperature": ("temperature", _F32, 0, 0),
              "top_k": ("top_k", _I32, -(2 ** 31), 2 ** 31 - 1),
              "top_p": ("top_p", _F32, 0, 0), "min_p": ("min_p", _F32, 0, 0),
              "seed": ("seed", _U64, 0, 0), "step": ("step", _U32, 0, 2 ** 32 - 1)}
_NUM_SLOT_TUPLES = {k: (_NUM,) + v for k, v in _NUM_SLOTS.items()}
_EQ_NONE = (_EQ, None)
_EQ_TYPES = (type(None), bool, int, float, str)


def _eq_value(v: Any) -> bool:
    """Whether a keyword value can be matched by equality (immutable, compared by C)."""
    t = type(v)
    if t in _EQ_TYPES:
        return True
    if t is tuple:
        return all(type(x) is str for x in v)
    torch = sys.modules.get("torch")
    return torch is not None and t is torch.dtype


def _array_slot(v: Any, name: str, ptr: int, uncond_offsets: bool) -> Optional[tuple]:
    """The slot of an array the call used in place (its pointer is in the field), or None.
    Host row_offsets are checked by the plan as Sampler._row_offsets checks them."""
    field, dimk, rs_field = _ARRAY_SLOTS[name]
    out_index = _OUT_INDEX.get(name[4:], -1) if name.startswith("out_") else -1
    if uncond_offsets and name == "uncond_logits":
        dimk = (_UNCOND_ANY, _FIXED)
    if type(v) is np.ndarray:
        if v.ndim != len(dimk) or _arrays.np_address(v) != ptr:
            return None
        try:
            m = memoryview(v)
        except Exception:  # dtypes without the buffer protocol (ml_dtypes.bfloat16)
            return None
        item = m.itemsize
        st = tuple([b // item for b in m.strides])
        if [s * item for s in st] != list(m.strides):
            return None
        kind, type_, value, dev, host = _NUMPY, np.ndarray, m.format, -1, True
    else:
        if v.dim() != len(dimk) or v.data_ptr() != ptr:
            return None
        if v.is_cpu:
            dev = -1
        elif v.is_cuda:
            dev = v.get_device()
        else:
            return None
        st = tuple(v.stride())
        kind, type_, value, item, host = _TORCH, type(v), v.dtype, 0, dev < 0
    if len(st) == 1 and st[0] != 1:
        return None  # a vector of one element with another stride: the full path
    return (kind, field, type_, value, item, dimk, tuple(v.shape), st, rs_field, dev,
            out_index >= 0, out_index, name == "row_offsets" and host)


def make_plan(sampler: Any, logits: Any, kw: Dict[str, Any], a: Any, res: Dict[str, Any],
              ctx: CallContext) -> Any:
    """The plan of a call that just succeeded with args `a` (a dds_py_plan_new capsule), or None
    when the call cannot be repeated by patching: host values converted or copied, arrays of
    other libraries, stream objects, outputs allocated on a given stream, allowed-token
    masks."""
    if ctx.converted or ctx.lib not in ("numpy", "torch") or kw["allowed_token_masks"] is not None:
        return None  # (allowed_token_masks: not planned, every call takes the full path)
    tensor = _arrays.torch_tensor_type()
    uncond_offsets = kw["uncond_row_offsets"] is not None
    slots = []
    add = slots.append
    for name in PLAN_SLOTS:
        v = logits if name == "logits" else kw[name]
        if v is None:
            add(_EQ_NONE)
            continue
        t = type(v)
        if t is float or t is int:
            num = _NUM_SLOT_TUPLES.get(name)
            if num is not None and (t is int or num[2] == _F32):
                add(num)
            elif name == "banned_token" and t is int:
                add((_NUM, "banned_token", _I32, -1, sampler.vocab_size - 1))
            else:
                add((_EQ, v))
        elif t is str or t is bool:
            add((_EQ, v))
        elif t is np.ndarray or (t is tensor and tensor is not None):
            slot = (None if name not in _ARRAY_SLOTS else
                    _array_slot(v, name, getattr(a, _ARRAY_SLOTS[name][0]), uncond_offsets))
            if slot is None:
                return None
            add(slot)
        elif _eq_value(v):
            add((_EQ, v))
        elif t is list and name == "outputs" and all(type(x) is str for x in v):
            add((_EQ, tuple(v)))  # a list of names: compared item by item
        else:
            return None
    if slots[0][0] == _EQ or slots[0][0] == _NUM:
        return None
    allocs = []
    rows = []  # CUDA row vectors of 4-byte elements: one allocation for all of them
    for key, arr in res.items():
        if kw["out_" + key] is not None:
            continue  # a given output: one of the slots
        dims = (-2,) if key == "request_status" else (-1,) + tuple(arr.shape[1:])
        if ctx.lib == "numpy":
            try:
                memoryview(arr)
            except Exception:
                return None
            factory = functools.partial(np.empty, dtype=arr.dtype)
        else:
            if ctx.stream_given:
                return None  # allocated under the given stream: not repeated here
            torch = sys.modules["torch"]
            factory = functools.partial(torch.empty, dtype=arr.dtype, device=arr.device)
            if dims == (-1,) and _grouped(arr) and arr.dtype in (torch.int32, torch.float32):
                rows.append((key, arr.dtype, (key, _OUT_INDEX[key], True, dims, factory)))
                continue
        allocs.append((key, _OUT_INDEX[key], ctx.lib == "torch", dims, factory))
    if len(rows) == 1:
        allocs.append(rows[0][2])  # one row vector: its own allocation
    elif rows:
        allocs.append((tuple(r[0] for r in rows), tuple(_OUT_INDEX[r[0]] for r in rows), True,
                       (-1,), _torch_rows(tuple(r[1] for r in rows), res[rows[0][0]].device)))
    stream_fn = stream_dev = None
    if ctx.backend == "cuda" and not ctx.stream_given:
        torch = sys.modules.get("torch")
        stream_fn = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
        if ctx.lib != "torch" or stream_fn is None:
            return None
        stream_dev = ctx.device
    return _dds.dds_py_plan_new(sampler._handle, a, sampler.max_rows, sampler.max_requests,
                                tuple(slots), tuple(allocs), stream_fn, stream_dev,
                                ctx.stream if ctx.stream_given else 0)


def _grouped(arr: Any) -> bool:
    """Whether a planned call allocates this torch output with the others of its kind in one
    allocation (_torch_rows): on CUDA, where an allocation costs several view ops (on the CPU,
    torch.empty costs about one). tests/test_plans.py replaces it to check the grouped path on
    the CPU backend."""
    return arr.is_cuda


def _torch_rows(dtypes: Tuple[Any, ...], device: Any) -> Any:
    """A planned call's allocator of k CUDA row vectors of 4-byte dtypes: one float32 tensor
    [k, rows], its rows as the outputs (int32 ones reinterpreted with .view). One CUDA allocation
    and two view ops cost less host time than k allocations (bench/python_call_cost.py); the
    outputs are views of one buffer, which lives while any of them does."""
    torch = sys.modules["torch"]
    f32 = torch.float32
    empty = torch.empty
    k = len(dtypes)
    recast = tuple((i, dt) for i, dt in enumerate(dtypes) if dt is not f32)

    def make(shape: Tuple[int]) -> Tuple[Any, ...]:
        parts = empty((k, shape[0]), dtype=f32, device=device).unbind()
        if not recast:
            return parts
        parts = list(parts)
        for i, dt in recast:
            parts[i] = parts[i].view(dt)
        return tuple(parts)
    return make


def result_tuple(res: Dict[str, Any]) -> Tuple[Any, ...]:
    """The outputs in SampleResult's field order (None where not produced)."""
    g = res.get
    return (g("tokens"), g("logprobs"), g("argmax"), g("confidence"), g("margin"),
            g("entropy"), g("probs"), g("request_status"))


__all__ = ["ArrayInfo", "LOGIT_DTYPES", "SAMPLE_OUTPUTS", "build_sample_args", "check_float",
           "check_int", "result_tuple", "wanted_outputs"]
