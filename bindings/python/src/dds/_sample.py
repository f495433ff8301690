"""The dds_sample_args of a Sampler.sample call, built from its keywords.

One builder serves Sampler.sample (into the sampler's reused args struct, reset by
dds_sample_args_init) and the vocabulary-parallel ShardCall (a struct of its own). The keywords
arrive as one dict (Sampler.sample's locals(), or sample_keywords() of a **kwargs call), so the
keyword list and its defaults live in Sampler.sample's signature only.

The per-call path is written for a low host cost: each array is described once, values equal to
the C defaults are skipped (the reset struct holds them), and outputs are validated and
addressed in one pass.
"""

from __future__ import annotations

import numbers
from typing import Any, Dict, Optional, Tuple

from . import _dds
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
    if num_rows > sampler.max_rows:
        raise ValueError(f"logits: {num_rows} rows exceed the sampler's max_rows "
                         f"({sampler.max_rows})")
    a.num_rows = num_rows
    a.logits = linfo.ptr
    if ldt != "float32":
        a.dtype = DTYPE_CODES[ldt]
    a.row_stride = row_stride

    row_offsets = kw["row_offsets"]
    if row_offsets is None:
        R = num_rows
    else:
        ptr, R, _ = sampler._row_offsets(row_offsets, num_rows, ctx)
        a.row_offsets = ptr
    if num_rows and R > sampler.max_requests:
        raise ValueError(f"row_offsets: {R} requests exceed the sampler's "
                         f"max_requests ({sampler.max_requests})")
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


def result_tuple(res: Dict[str, Any]) -> Tuple[Any, ...]:
    """The outputs in SampleResult's field order (None where not produced)."""
    g = res.get
    return (g("tokens"), g("logprobs"), g("argmax"), g("confidence"), g("margin"),
            g("entropy"), g("probs"), g("request_status"))


__all__ = ["ArrayInfo", "LOGIT_DTYPES", "SAMPLE_OUTPUTS", "build_sample_args", "check_float",
           "check_int", "result_tuple", "wanted_outputs"]
