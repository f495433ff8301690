"""dds as PyTorch custom operators, for torch.compile (imported only when torch is).

Every call of a decode step is registered with torch.library, each with a fake (meta)
implementation that gives the output shapes and dtypes:

- `torch.ops.dds.sample` / `sample_out` (Sampler.sample);
- `torch.ops.dds.reveal` / `reveal_out` (Sampler.reveal; `reveal_out` also takes the canvas,
  written in place);
- `torch.ops.dds.verify_drafts` / `verify_drafts_out` (Sampler.verify_drafts);
- `torch.ops.dds.stash_logprobs` / `stash_logprobs_out` (Sampler.stash_logprobs).

The first of each pair allocates the outputs named by the bits of `outputs` and returns them
as a list; the `_out` one writes the given out_* tensors in place (declared in its schema as
mutated). A compiled function that calls these Sampler methods on torch tensors traces each
call as one graph node (fullgraph=True, no graph break), and CUDA graphs
(mode="reduce-overhead") capture them like any kernel. While torch.compile traces, the methods
hand their arguments to `traced_sample` / `traced_call`, which map them onto the operators:

- the sampler travels as its integer id (a constant of the graph);
- each per-request value is a Python scalar (a graph constant: a new value recompiles) or a
  tensor (read at run time: what a decode loop should pass for seeds and steps); host lists and
  tuples become constant tensors on the device of the call's first tensor;
- the outputs asked for and not given are allocated by the operator and returned (or, beside
  out_* tensors or a canvas, allocated in the graph and written by the `_out` operator);
- output shapes that eager calls derive from values (stash_logprobs' rows_per_slot from host
  row_offsets) are resolved while tracing: from host lists, else they must be given.

Outside torch.compile the methods do not go through the operators (their eager dispatch costs
more than the call itself); `torch.ops.dds.*` may still be called directly.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from . import _decode, _sampler
from ._decode import REVEAL_OUTPUTS, REVEAL_POLICIES, VERIFY_OUTPUTS
from ._sample import SAMPLE_OUTPUTS

_OUT_DTYPES = (torch.int32, torch.float32, torch.int32, torch.float32, torch.float32,
               torch.float32, None, torch.int32)  # SAMPLE_OUTPUTS order; probs: probs_dtype
_STATS = {"processed": 0, "guided": 1}
_LOGITS_MODES = {"logprobs": 0, "logits": 1}
_U64 = 2 ** 64


# The arguments of both operators, in order (the schema is written out once, here).
_ARGS = ("SymInt sampler_id, Tensor logits, Tensor? row_offsets, Tensor? positions, "
         "Tensor? uncond_logits, Tensor? uncond_row_offsets, "
         "float guidance_scale, Tensor? guidance_scales, float temperature, Tensor? temperatures, "
         "SymInt top_k, Tensor? top_ks, float top_p, Tensor? top_ps, float min_p, Tensor? min_ps, "
         "SymInt seed, Tensor? seeds, SymInt step, Tensor? steps, SymInt banned_token, "
         "SymInt stats, SymInt outputs, str? dtype, ScalarType? probs_dtype, "
         "Tensor? allowed_token_masks")
_NARGS = _ARGS.count(",") + 1
_OUT_ARGS = ", ".join(f"Tensor({chr(97 + i)}!)? out_{n}" for i, n in enumerate(SAMPLE_OUTPUTS))

torch.library.define("dds::sample", f"({_ARGS}) -> Tensor[]")
torch.library.define("dds::sample_out", f"({_ARGS}, {_OUT_ARGS}) -> ()")


def _run(args: Any, outs: Any) -> List[Tensor]:
    """The eager call behind both operators: Sampler.sample with the operator's arguments."""
    (sampler_id, logits, row_offsets, positions, uncond_logits, uncond_row_offsets,
     guidance_scale, guidance_scales, temperature, temperatures, top_k, top_ks, top_p, top_ps,
     min_p, min_ps, seed, seeds, step, steps, banned_token, stats, outputs, dtype,
     probs_dtype, allowed_token_masks) = args
    s = _sampler.sampler_by_id(sampler_id)
    seeds = _host_seeds(seeds)

    def pick(scalar: Any, tensor: Optional[Tensor]) -> Any:
        return scalar if tensor is None else tensor

    kw = _sampler.sample_keywords(dict(
        row_offsets=row_offsets, positions=positions, uncond_logits=uncond_logits,
        uncond_row_offsets=uncond_row_offsets,
        guidance_scale=pick(guidance_scale, guidance_scales),
        temperature=pick(temperature, temperatures), top_k=pick(top_k, top_ks),
        top_p=pick(top_p, top_ps), min_p=pick(min_p, min_ps),
        seed=pick(seed % _U64, seeds), step=pick(step, steps), banned_token=banned_token,
        stats=stats, dtype=dtype, probs_dtype=probs_dtype,
        allowed_token_masks=allowed_token_masks,
        outputs=tuple(n for i, n in enumerate(SAMPLE_OUTPUTS) if outputs >> i & 1)))
    if outs is not None:
        for n, t in zip(SAMPLE_OUTPUTS, outs):
            kw["out_" + n] = t
    r = s._sample_kw(logits, kw)
    return [r[i] for i in range(len(SAMPLE_OUTPUTS)) if outputs >> i & 1]


@torch.library.impl("dds::sample", ("cpu", "cuda"))
def sample_op(*args: Any) -> List[Tensor]:
    """torch.ops.dds.sample: dds_sample with the outputs of the bits of `outputs` allocated
    (bit i: SAMPLE_OUTPUTS[i]) and returned in that order. Per-request values: the scalar
    (guidance_scale, ..., step; seed as the int64 of its uint64 bits) where the matching tensor
    (guidance_scales, ..., steps) is None. `sampler_id` is a live Sampler's `_op_id`."""
    return _run(args, None)


@torch.library.impl("dds::sample_out", ("cpu", "cuda"))
def sample_out_op(*args: Any) -> None:
    """torch.ops.dds.sample_out: torch.ops.dds.sample's arguments (`outputs` 0), then the eight
    out_* tensors (or None) of Sampler.sample, written in place."""
    _run(args[:_NARGS], args[_NARGS:])


@torch.library.register_fake("dds::sample")
def _sample_fake(*args: Any) -> List[Tensor]:
    """Output shapes and dtypes of torch.ops.dds.sample, for tracing."""
    logits, row_offsets, outputs, probs_dtype = args[1], args[2], args[22], args[24]
    rows, cols = logits.shape[0], logits.shape[1]
    R = rows if row_offsets is None else row_offsets.shape[0] - 1
    res = []
    for i, name in enumerate(SAMPLE_OUTPUTS):
        if not outputs >> i & 1:
            continue
        if name == "probs":
            res.append(logits.new_empty((rows, cols), dtype=probs_dtype or torch.float32))
        else:
            res.append(logits.new_empty((R if name == "request_status" else rows,),
                                        dtype=_OUT_DTYPES[i]))
    return res


@torch.library.register_fake("dds::sample_out")
def _sample_out_fake(*args: Any) -> None:
    return None


def _tensor(v: Any, dtype: torch.dtype, device: Any) -> Optional[Tensor]:
    if v is None or isinstance(v, Tensor):
        return v
    if isinstance(v, (list, tuple)):
        return torch.tensor(v, dtype=dtype, device=device)
    raise TypeError(f"expected a tensor or a list under torch.compile, got {type(v).__name__}")


def _split(v: Any, name: str, dtype: torch.dtype, device: Any) -> Any:
    """(scalar or None, tensor or None) of a per-request value; a host list becomes a constant
    tensor on `device`."""
    if v is None or isinstance(v, Tensor):
        return None, v
    if isinstance(v, (list, tuple)):
        return None, torch.tensor(v, dtype=dtype, device=device)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name}: expected a number, a list or a tensor, got {type(v).__name__}")
    return v, None


def _param(v: Any, name: str, default: Any, dtype: torch.dtype, device: Any) -> Any:
    """(scalar, tensor or None) of a per-request value (`default` beside a tensor)."""
    sc, t = _split(v, name, dtype, device)
    return (default if sc is None else sc), t


def _seed_bits(seed: Any) -> Any:
    """A seed or a list of seeds (uint64 values) as the int64 values of the same bits."""
    if isinstance(seed, (list, tuple)):
        for v in seed:
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < _U64:
                raise ValueError(f"seed: values must be integers in [0, {_U64 - 1}]; got {v!r}")
        return [v - _U64 if v >= 2 ** 63 else v for v in seed]
    if isinstance(seed, int) and not isinstance(seed, bool):
        if seed < 0 or seed >= _U64:
            raise ValueError(f"seed: {seed} is outside [0, {_U64 - 1}]")
        return seed - _U64 if seed >= 2 ** 63 else seed
    return seed


def _host_seeds(seeds: Optional[Tensor]) -> Optional[Tensor]:
    """Host int64 seeds as uint64 (range-checked as uint64 by the eager call: the same bits)."""
    if seeds is not None and seeds.dtype == torch.int64 and not seeds.is_cuda:
        return seeds.view(torch.uint64)
    return seeds


def traced_sample(s: Any, logits: Any, row_offsets: Any, positions: Any, uncond_logits: Any,
                  uncond_row_offsets: Any, guidance_scale: Any, temperature: Any, top_k: Any,
                  top_p: Any, min_p: Any, seed: Any, step: Any, banned_token: Any, stats: Any,
                  outputs: Any, dtype: Any, probs_dtype: Any, out_tokens: Any,
                  out_logprobs: Any, out_argmax: Any, out_confidence: Any, out_margin: Any,
                  out_entropy: Any, out_probs: Any, out_request_status: Any,
                  stream: Any, allowed_token_masks: Any = None) -> Any:
    """Sampler.sample while torch.compile traces: the same call as torch.ops.dds.sample."""
    if stream is not None:
        raise ValueError("stream: must be None under torch.compile (the op runs on the current "
                         "stream)")
    if not isinstance(logits, Tensor):
        raise TypeError(f"logits: expected a torch tensor under torch.compile, got "
                        f"{type(logits).__name__}")
    dev = logits.device
    names = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    for n in names:
        if n not in SAMPLE_OUTPUTS:
            raise ValueError(f"outputs: unknown output {n!r}; choose from {SAMPLE_OUTPUTS}")
    given = (out_tokens, out_logprobs, out_argmax, out_confidence, out_margin, out_entropy,
             out_probs, out_request_status)
    mask = 0
    for i, n in enumerate(SAMPLE_OUTPUTS):
        if n in names and given[i] is None:
            mask |= 1 << i
    if isinstance(stats, str):
        if stats.lower() not in _STATS:
            raise ValueError(f"stats: must be 'processed' or 'guided', got {stats!r}")
        stats = _STATS[stats.lower()]
    if isinstance(probs_dtype, str):
        probs_dtype = getattr(torch, {"bf16": "bfloat16", "f16": "float16", "half": "float16",
                                      "f32": "float32"}.get(probs_dtype.lower(),
                                                            probs_dtype.lower()))
    g, gs = _param(guidance_scale, "guidance_scale", 0.0, torch.float32, dev)
    t, ts = _param(temperature, "temperature", 1.0, torch.float32, dev)
    k, ks = _param(top_k, "top_k", 0, torch.int32, dev)
    p, ps = _param(top_p, "top_p", 1.0, torch.float32, dev)
    m, ms = _param(min_p, "min_p", 0.0, torch.float32, dev)
    sd, sds = _param(_seed_bits(seed), "seed", 0, torch.int64, dev)
    st, sts = _param(step, "step", 0, torch.int32, dev)
    head = (s._op_id, logits, _tensor(row_offsets, torch.int32, dev),
            _tensor(positions, torch.int32, dev), uncond_logits,
            _tensor(uncond_row_offsets, torch.int32, dev), g, gs, t, ts, k, ks, p, ps, m, ms,
            sd, sds, st, sts, -1 if banned_token is None else banned_token, stats)
    dt = None if dtype is None else str(dtype)
    if all(o is None for o in given):
        masks = _tensor(allowed_token_masks, torch.int32, dev)
        lst = torch.ops.dds.sample(*head, mask, dt, probs_dtype, masks)
        res = [None] * len(SAMPLE_OUTPUTS)
        j = 0
        for i in range(len(SAMPLE_OUTPUTS)):
            if mask >> i & 1:
                res[i] = lst[j]
                j += 1
        return _sampler.SampleResult(*res)
    # out_* given: the outputs asked for and not given are allocated here, then all written in
    # place by one dds::sample_out.
    rows = logits.shape[0]
    R = rows if row_offsets is None else len(row_offsets) - 1
    res = list(given)
    for i, n in enumerate(SAMPLE_OUTPUTS):
        if mask >> i & 1:
            if n == "probs":
                res[i] = logits.new_empty((rows, logits.shape[1]),
                                          dtype=probs_dtype or torch.float32)
            else:
                res[i] = logits.new_empty((R if n == "request_status" else rows,),
                                          dtype=_OUT_DTYPES[i])
    torch.ops.dds.sample_out(*head, 0, dt, probs_dtype,
                             _tensor(allowed_token_masks, torch.int32, dev), *res)
    return _sampler.SampleResult(*res)


# -- reveal, verify_drafts, stash_logprobs ----------------------------------------------------
# Each is described once by an _Op (its arguments, in the operators' order) from which come
# the schemas of torch.ops.dds.<name> (outputs allocated, returned as a list) and
# torch.ops.dds.<name>_out (out_* tensors written in place), the eager implementation (the
# Sampler method with the operator's arguments), the fake one, and the traced call.
class _Arg(NamedTuple):
    name: str
    # "tensor": Tensor (the call's first argument); "opt": Tensor? (a host list becomes a
    # constant tensor of `dtype`); "mut": Tensor(!)?, written in place (only in <name>_out);
    # "float" / "int": a per-request value, as a scalar (float? / SymInt?) and a tensor
    # (Tensor? <name>_t); "seed": an "int" of uint64 values (passed as the int64 of their bits);
    # "vec": a per-request value passed as Tensor? only (a scalar becomes a constant tensor);
    # "const": SymInt, `dtype` the value that None stands for (SymInt? where `dtype` is None);
    # "str": str?.
    kind: str
    dtype: Any = None
    names: Optional[Dict[str, int]] = None  # string values -> ints (policy, logits_mode)


class _Op(NamedTuple):
    name: str  # torch.ops.dds.<name>, <name>_out
    method: str  # the Sampler method
    args: Tuple[_Arg, ...]
    outputs: Tuple[str, ...]  # the method's output names, in its result's order
    always: Tuple[str, ...]  # outputs the method always produces
    shapes: Any  # (arguments by name) -> {output: (shape, dtype, fill of allocated ones)}


def _rows_requests(first: Tensor, offs: Any) -> Tuple[Any, Any]:
    """(rows, requests) of a call on `first`'s rows with row_offsets `offs` (None, a tensor or
    a host list)."""
    rows = first.shape[0]
    if offs is None:
        return rows, rows
    return rows, (len(offs) if isinstance(offs, (list, tuple)) else offs.shape[0]) - 1


def _reveal_shapes(d: Dict[str, Any]) -> Dict[str, Any]:
    rows, R = _rows_requests(d["scores"], d["row_offsets"])
    return {"reveal": ((rows,), torch.uint8, None), "num_revealed": ((R,), torch.int32, None),
            "finished": ((R,), torch.int32, None), "request_status": ((R,), torch.int32, None)}


def _verify_shapes(d: Dict[str, Any]) -> Dict[str, Any]:
    dt = d["draft_tokens"]
    R, n = (d["target_logits"].shape[0], 0) if dt is None else (dt.shape[0], dt.shape[1])
    return {"accepted_counts": ((R,), torch.int32, None),
            "tokens": ((R, n + 1), torch.int32, None),
            "logprobs": ((R, n + 1), torch.float32, None),
            "request_status": ((R,), torch.int32, None)}


def _stash_shapes(d: Dict[str, Any]) -> Dict[str, Any]:
    _, R = _rows_requests(d["logits"], d["row_offsets"])
    shape = (d["num_slots"], d["rows_per_slot"], d["num_top"] + 1)
    return {"token_ids": (shape, torch.int32, 0), "logprobs": (shape, torch.float32, -math.inf),
            "ranks": (shape, torch.int32, 0), "request_status": ((R,), torch.int32, 0)}


_I32, _U8, _F32 = torch.int32, torch.uint8, torch.float32
_MASKS = _Arg("allowed_token_masks", "opt", _I32)
_OPS = (
    _Op("reveal", "reveal", (
        _Arg("scores", "tensor"), _Arg("row_offsets", "opt", _I32),
        _Arg("positions", "opt", _I32), _Arg("eligible", "opt", _U8),
        _Arg("policy", "int", _I32, REVEAL_POLICIES), _Arg("count", "int", _I32),
        _Arg("steps_left", "vec", _I32), _Arg("threshold", "float", _F32),
        _Arg("factor", "float", _F32), _Arg("entropy_bound", "float", _F32),
        _Arg("position_temperature", "float", _F32), _Arg("seed", "seed", torch.int64),
        _Arg("step", "int", _I32), _Arg("canvas", "mut"), _Arg("tokens", "opt", _I32),
        _Arg("mask_token", "const", -1), _Arg("eos_token", "const", -1)),
        REVEAL_OUTPUTS, ("reveal",), _reveal_shapes),
    _Op("verify_drafts", "verify_drafts", (
        _Arg("target_logits", "tensor"), _Arg("draft_logits", "opt"),
        _Arg("draft_tokens", "opt", _I32), _Arg("draft_counts", "opt", _I32),
        _Arg("temperature", "float", _F32), _Arg("top_k", "int", _I32),
        _Arg("top_p", "float", _F32), _Arg("min_p", "float", _F32),
        _Arg("seed", "seed", torch.int64), _Arg("step", "int", _I32),
        _Arg("banned_token", "const", -1), _Arg("dtype", "str"), _MASKS),
        VERIFY_OUTPUTS, ("accepted_counts", "tokens"), _verify_shapes),
    _Op("stash_logprobs", "stash_logprobs", (
        _Arg("logits", "tensor"), _Arg("row_offsets", "opt", _I32), _Arg("keep", "opt", _U8),
        _Arg("slots", "opt", _I32), _Arg("num_valid", "opt", _I32),
        _Arg("temperature", "float", _F32), _Arg("committed_tokens", "opt", _I32),
        _Arg("token_ids", "opt", _I32), _Arg("num_token_ids", "opt", _I32),
        _Arg("num_top", "const", None), _Arg("logits_mode", "const", None, _LOGITS_MODES),
        _Arg("num_slots", "const", None), _Arg("rows_per_slot", "const", None),
        _Arg("dtype", "str"), _MASKS),
        _sampler.STASH_OUTPUTS, (), _stash_shapes),
)
_OP_BY_METHOD = {op.method: op for op in _OPS}


def _schema(op: _Op, out: bool) -> str:
    parts = ["SymInt sampler_id"]
    alias = iter("abcdefghijklmnop")
    for a in op.args:
        if a.kind == "tensor":
            parts.append(f"Tensor {a.name}")
        elif a.kind in ("opt", "vec"):
            parts.append(f"Tensor? {a.name}")
        elif a.kind == "mut":  # only in <name>_out (a list return cannot beside a mutation)
            if out:
                parts.append(f"Tensor({next(alias)}!)? {a.name}")
        elif a.kind in ("float", "int", "seed"):
            parts.append(f"{'float' if a.kind == 'float' else 'SymInt'}? {a.name}, "
                         f"Tensor? {a.name}_t")
        elif a.kind == "const":
            parts.append(f"SymInt{'?' if a.dtype is None else ''} {a.name}")
        else:
            parts.append(f"str? {a.name}")
    parts.append("SymInt outputs")
    if out:
        parts += [f"Tensor({next(alias)}!)? out_{n}" for n in op.outputs]
        return f"({', '.join(parts)}) -> ()"
    return f"({', '.join(parts)}) -> Tensor[]"


def _named(op: _Op, args: Any, out: bool) -> Dict[str, Any]:
    """The positional arguments of <op> / <op>_out by name (per-request tensors as <name>_t)."""
    d: Dict[str, Any] = {}
    it = iter(args[1:])
    for a in op.args:
        d[a.name] = next(it) if out or a.kind != "mut" else None
        if a.kind in ("float", "int", "seed"):
            d[a.name + "_t"] = next(it)
    d["outputs"] = next(it)
    for n in op.outputs:
        d["out_" + n] = next(it, None)
    return d


def _decode_run(op: _Op, args: Any, out: bool) -> List[Tensor]:
    """The eager call behind torch.ops.dds.<op> / <op>_out: the Sampler method."""
    d = _named(op, args, out)
    kw: Dict[str, Any] = {}
    for a in op.args:
        v = d[a.name]
        if a.kind in ("float", "int", "seed"):
            t = d[a.name + "_t"]
            if a.kind == "seed":  # int64 bits -> the uint64 value
                v, t = (None if v is None else v % _U64), _host_seeds(t)
            v = v if t is None else t
        kw[a.name] = v
    mask = d["outputs"]
    kw["outputs"] = tuple(n for i, n in enumerate(op.outputs) if mask >> i & 1)
    for n in op.outputs:
        kw["out_" + n] = d["out_" + n]
    r = getattr(_sampler.sampler_by_id(args[0]), op.method)(**kw)
    return [getattr(r, n) for i, n in enumerate(op.outputs) if mask >> i & 1]


def _decode_fake(op: _Op, args: Any) -> List[Tensor]:
    d = _named(op, args, False)
    first = d[op.args[0].name]
    shapes = op.shapes(d)
    return [first.new_empty(shapes[n][0], dtype=shapes[n][1])
            for i, n in enumerate(op.outputs) if d["outputs"] >> i & 1]


def _register(op: _Op) -> None:
    torch.library.define(f"dds::{op.name}", _schema(op, False))
    torch.library.define(f"dds::{op.name}_out", _schema(op, True))
    torch.library.impl(f"dds::{op.name}", ("cpu", "cuda"))(
        lambda *args: _decode_run(op, args, False))

    def run_out(*args: Any) -> None:
        _decode_run(op, args, True)

    torch.library.impl(f"dds::{op.name}_out", ("cpu", "cuda"))(run_out)
    torch.library.register_fake(f"dds::{op.name}")(lambda *args: _decode_fake(op, args))
    torch.library.register_fake(f"dds::{op.name}_out")(lambda *args: None)


for _op in _OPS:
    _register(_op)


def _stash_geometry(s: Any, kw: Dict[str, Any], dev: Any) -> None:
    """stash_logprobs' num_top / num_slots / rows_per_slot defaults, resolved while tracing
    (the output shapes are graph constants)."""
    tid = kw["token_ids"] = _tensor(kw["token_ids"], torch.int32, dev)
    nt, ns, rps = kw["num_top"], kw["num_slots"], kw["rows_per_slot"]
    if tid is not None:
        if tid.dim() != 2:
            raise ValueError(f"token_ids: expected shape [num_requests, num_top], got "
                             f"{tuple(tid.shape)}")
        nt = tid.shape[1] if nt is None else nt
    for n in ("token_ids", "logprobs", "ranks"):
        o = kw["out_" + n]
        if isinstance(o, Tensor) and o.dim() == 3:
            ns = o.shape[0] if ns is None else ns
            rps = o.shape[1] if rps is None else rps
    offs = kw["row_offsets"]
    if ns is None:
        ns = _rows_requests(kw["logits"], offs)[1]
    if rps is None:
        if offs is None:
            rps = 1
        elif isinstance(offs, (list, tuple)):
            rps = max([1] + [b - a for a, b in zip(offs, offs[1:])])
        else:
            raise ValueError("rows_per_slot: required under torch.compile when row_offsets is a "
                             "tensor and no 3-D out_* tensor gives the geometry")
    kw["num_top"] = min(20, s.max_stash_width) if nt is None else nt
    kw["num_slots"], kw["rows_per_slot"] = ns, rps


def op_call(s: Any, method: str, **kwargs: Any) -> Tuple[str, List[Any], List[Any], int]:
    """The operator call of s.<method>(**kwargs) (reveal, verify_drafts, stash_logprobs):
    (operator name, its arguments, the method's outputs in order - given or allocated here for
    <name>_out, None for those the operator returns - and the bits of those it returns)."""
    op = _OP_BY_METHOD[method]
    kw = dict(_DEFAULTS[method])
    kw.update(kwargs)
    if kw["stream"] is not None:
        raise ValueError("stream: must be None under torch.compile (the op runs on the current "
                         "stream)")
    first = kw[op.args[0].name]
    if not isinstance(first, Tensor):
        raise TypeError(f"{op.args[0].name}: expected a torch tensor under torch.compile, got "
                        f"{type(first).__name__}")
    dev = first.device
    if op.method == "stash_logprobs":
        _stash_geometry(s, kw, dev)
    groups: List[List[Any]] = []  # the operator's arguments of each _Arg
    for a in op.args:
        v = kw[a.name]
        if a.names is not None:  # names -> ints (one or per request)
            try:
                if isinstance(v, str):
                    v = a.names[v.lower()]
                elif isinstance(v, (list, tuple)):
                    v = [a.names[p.lower()] if isinstance(p, str) else p for p in v]
            except KeyError:
                raise ValueError(f"{a.name}: must be one of {tuple(a.names)}, got {v!r}") \
                    from None
        if a.kind == "vec" and isinstance(v, int) and not isinstance(v, bool):
            v = first.new_full((_rows_requests(first, kw["row_offsets"])[1],), v,
                               dtype=a.dtype)  # no host copy in the eager call
        if a.kind in ("tensor", "opt", "mut", "vec"):
            groups.append([v if a.kind == "tensor" else _tensor(v, a.dtype, dev)])
        elif a.kind in ("float", "int", "seed"):
            groups.append(list(_split(_seed_bits(v) if a.kind == "seed" else v, a.name, a.dtype,
                                      dev)))
        elif a.kind == "const":
            groups.append([a.dtype if v is None else v])
        else:
            groups.append([None if v is None else str(v)])
    names = s._wanted(kw["outputs"], op.outputs)
    given = [kw["out_" + n] for n in op.outputs]
    if op.method == "stash_logprobs" and not (
            names.intersection(("token_ids", "logprobs", "ranks")) or
            any(g is not None for g in given[:3])):
        raise ValueError("outputs: name at least one of token_ids, logprobs, ranks (or pass "
                         "an out_* tensor)")
    names.update(op.always)
    mask = 0
    for i, n in enumerate(op.outputs):
        if n in names and given[i] is None:
            mask |= 1 << i
    res: List[Any] = list(given)
    muts = [g[0] for g, a in zip(groups, op.args) if a.kind == "mut"]
    if all(g is None for g in given + muts):
        flat = [s._op_id] + [v for g, a in zip(groups, op.args) if a.kind != "mut" for v in g]
        return op.name, flat + [mask], res, mask
    # out_* (or canvas) given: the other outputs asked for are allocated here, then all written
    # in place by one <name>_out
    flat = [s._op_id] + [v for g in groups for v in g]
    shapes = op.shapes(_named(op, flat + [0], True))
    for i, n in enumerate(op.outputs):
        if mask >> i & 1:
            shape, dtype, fill = shapes[n]
            res[i] = (first.new_empty(shape, dtype=dtype) if fill is None
                      else first.new_full(shape, fill, dtype=dtype))
    return op.name + "_out", flat + [0] + res, res, 0


_RESULTS = {"reveal": _decode.RevealResult, "verify_drafts": _decode.VerifyResult,
            "stash_logprobs": _sampler.StashResult}
_DEFAULTS = {m: {p.name: p.default for p in inspect.signature(getattr(_sampler.Sampler, m))
                 .parameters.values() if p.default is not inspect.Parameter.empty}
             for m in _RESULTS}
# Their positional parameters after self, in order.
_POSITIONAL = {m: [p.name for p in inspect.signature(getattr(_sampler.Sampler, m)).parameters.values()
                   if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD][1:]
               for m in _RESULTS}


def traced_call(method: str, s: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """Sampler.<method> (reveal, verify_drafts, stash_logprobs) on sampler `s` while
    torch.compile traces, with the method's positional and keyword arguments: the same call as
    torch.ops.dds.<method> (or <method>_out when out_* tensors or a canvas are given)."""
    kw = dict(_DEFAULTS[method])
    kw.update(zip(_POSITIONAL[method], args))
    kw.update(kwargs)
    name, args, res, mask = op_call(s, method, **kw)
    got = iter(getattr(torch.ops.dds, name)(*args) or ())
    for i in range(len(res)):
        if mask >> i & 1:
            res[i] = next(got)
    return _RESULTS[method](*res)


def register() -> Any:
    """Called once by dds._sampler.enable_torch: the ops are registered at import; returns the
    function that tells whether torch.compile is tracing."""
    _sampler._torch_traced_sample = traced_sample
    _decode._torch_traced = traced_call
    _decode._torch_compiling = torch.compiler.is_compiling
    from . import vllm
    torch._dynamo.assume_constant_result(vllm._traced_index)
    return torch.compiler.is_compiling
