"""dds as PyTorch custom operators, for torch.compile (imported only when torch is).

`torch.ops.dds.sample` is registered with torch.library.custom_op: its fake (meta)
implementation gives the output shapes and dtypes, so a compiled function that calls
`Sampler.sample` on torch tensors traces it as one graph node (fullgraph=True, no graph break),
and CUDA graphs (mode="reduce-overhead") capture it like any kernel. While torch.compile traces,
Sampler.sample hands its arguments to `traced_sample`, which maps them onto the operator:

- the sampler travels as its integer id (a constant of the graph);
- each per-request value is a Python scalar (a graph constant: a new value recompiles) or a
  tensor (read at run time: what a decode loop should pass for seeds and steps); host lists and
  tuples become constant tensors on the logits' device;
- out_* tensors are mutated in place (declared in mutates_args); the outputs asked for in
  `outputs` and not given are allocated by the operator and returned.

Outside torch.compile, Sampler.sample does not go through the operator (its eager dispatch
costs more than the call itself); `torch.ops.dds.sample` may still be called directly.
"""

from __future__ import annotations

from typing import Any, List, Optional

import torch
from torch import Tensor

from . import _sampler
from ._sample import SAMPLE_OUTPUTS

_OUT_DTYPES = (torch.int32, torch.float32, torch.int32, torch.float32, torch.float32,
               torch.float32, None, torch.int32)  # SAMPLE_OUTPUTS order; probs: probs_dtype
_STATS = {"processed": 0, "guided": 1}
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
    if seeds is not None and seeds.dtype == torch.int64 and not seeds.is_cuda:
        seeds = seeds.view(torch.uint64)  # host seeds are range-checked as uint64: same bits

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


def _param(v: Any, name: str, default: Any, dtype: torch.dtype, device: Any) -> Any:
    """(scalar, tensor or None) of a per-request value."""
    if isinstance(v, Tensor):
        return default, v
    if isinstance(v, (list, tuple)):
        return default, torch.tensor(v, dtype=dtype, device=device)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name}: expected a number, a list or a tensor, got {type(v).__name__}")
    return v, None


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
    if isinstance(seed, (list, tuple)):  # uint64 values: the same bits as int64
        for v in seed:
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < _U64:
                raise ValueError(f"seed: values must be integers in [0, {_U64 - 1}]; got {v!r}")
        seed = [v - _U64 if v >= 2 ** 63 else v for v in seed]
    sd, sds = _param(seed, "seed", 0, torch.int64, dev)
    st, sts = _param(step, "step", 0, torch.int32, dev)
    if sds is None:
        if sd < 0 or sd >= _U64:
            raise ValueError(f"seed: {sd} is outside [0, {_U64 - 1}]")
        if sd >= 2 ** 63:
            sd = sd - _U64  # the same 64 bits as int64
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


def register() -> Any:
    """Called once by dds._sampler.enable_torch: the ops are registered at import; returns the
    function that tells whether torch.compile is tracing."""
    _sampler._torch_traced_sample = traced_sample
    return torch.compiler.is_compiling
