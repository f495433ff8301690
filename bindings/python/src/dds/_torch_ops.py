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


@torch.library.custom_op(
    "dds::sample",
    mutates_args=("out_tokens", "out_logprobs", "out_argmax", "out_confidence", "out_margin",
                  "out_entropy", "out_probs", "out_request_status"))
def sample_op(sampler_id: int, logits: Tensor, row_offsets: Optional[Tensor],
              positions: Optional[Tensor], uncond_logits: Optional[Tensor],
              uncond_row_offsets: Optional[Tensor],
              guidance_scale: float, guidance_scales: Optional[Tensor],
              temperature: float, temperatures: Optional[Tensor],
              top_k: int, top_ks: Optional[Tensor], top_p: float, top_ps: Optional[Tensor],
              min_p: float, min_ps: Optional[Tensor], seed: int, seeds: Optional[Tensor],
              step: int, steps: Optional[Tensor], banned_token: int, stats: int,
              outputs: int, dtype: Optional[str], probs_dtype: Optional[torch.dtype],
              out_tokens: Optional[Tensor], out_logprobs: Optional[Tensor],
              out_argmax: Optional[Tensor], out_confidence: Optional[Tensor],
              out_margin: Optional[Tensor], out_entropy: Optional[Tensor],
              out_probs: Optional[Tensor], out_request_status: Optional[Tensor]) -> List[Tensor]:
    """dds_sample as a torch operator: Sampler `sampler_id` samples `logits`.

    Parameters
    ----------
    sampler_id : int
        ``Sampler._op_id`` of a live sampler.
    logits, row_offsets, positions, uncond_logits, uncond_row_offsets : Tensor
        As in Sampler.sample (tensors only).
    guidance_scale, temperature, top_k, top_p, min_p, seed, step : scalar
        One value for all requests, used where the matching tensor (guidance_scales, ...,
        steps) is None. seed holds the uint64 bits as a signed int64.
    banned_token, stats : int
        As in Sampler.sample (stats: 0 processed, 1 guided).
    outputs : int
        Bit i set: allocate and return output SAMPLE_OUTPUTS[i].
    dtype, probs_dtype : optional
        The logits' dtype override (raw 16-bit words) and the probs output's dtype.
    out_tokens, ..., out_request_status : Tensor, optional
        Written in place.

    Returns
    -------
    list of Tensor
        The allocated outputs, in SAMPLE_OUTPUTS order of the bits of `outputs`.
    """
    s = _sampler.sampler_by_id(sampler_id)

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
        outputs=tuple(n for i, n in enumerate(SAMPLE_OUTPUTS) if outputs >> i & 1),
        out_tokens=out_tokens, out_logprobs=out_logprobs, out_argmax=out_argmax,
        out_confidence=out_confidence, out_margin=out_margin, out_entropy=out_entropy,
        out_probs=out_probs, out_request_status=out_request_status))
    r = s._sample_kw(logits, kw)
    return [r[i] for i in range(len(SAMPLE_OUTPUTS)) if outputs >> i & 1]


@sample_op.register_fake
def _sample_fake(sampler_id: int, logits: Tensor, row_offsets: Optional[Tensor],
                 positions: Optional[Tensor], uncond_logits: Optional[Tensor],
                 uncond_row_offsets: Optional[Tensor],
                 guidance_scale: float, guidance_scales: Optional[Tensor],
                 temperature: float, temperatures: Optional[Tensor],
                 top_k: int, top_ks: Optional[Tensor], top_p: float, top_ps: Optional[Tensor],
                 min_p: float, min_ps: Optional[Tensor], seed: int, seeds: Optional[Tensor],
                 step: int, steps: Optional[Tensor], banned_token: int, stats: int,
                 outputs: int, dtype: Optional[str], probs_dtype: Optional[torch.dtype],
                 *out: Optional[Tensor]) -> List[Tensor]:
    """Output shapes and dtypes of torch.ops.dds.sample, for tracing."""
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
                  stream: Any) -> Any:
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
    sd, sds = _param(seed, "seed", 0, torch.int64, dev)
    st, sts = _param(step, "step", 0, torch.int32, dev)
    if sds is None:
        if sd < 0 or sd >= _U64:
            raise ValueError(f"seed: {sd} is outside [0, {_U64 - 1}]")
        if sd >= 2 ** 63:
            sd = sd - _U64  # the same 64 bits as int64
    lst = torch.ops.dds.sample(
        s._op_id, logits, _tensor(row_offsets, torch.int32, dev),
        _tensor(positions, torch.int32, dev), uncond_logits,
        _tensor(uncond_row_offsets, torch.int32, dev), g, gs, t, ts, k, ks, p, ps, m, ms, sd,
        sds, st, sts, -1 if banned_token is None else banned_token, stats, mask,
        None if dtype is None else str(dtype), probs_dtype, *given)
    res = list(given)
    j = 0
    for i in range(len(SAMPLE_OUTPUTS)):
        if mask >> i & 1:
            res[i] = lst[j]
            j += 1
    return _sampler.SampleResult(*res)


def register() -> Any:
    """Called once by dds._sampler.enable_torch: the ops are registered at import; returns the
    function that tells whether torch.compile is tracing."""
    _sampler._torch_traced_sample = traced_sample
    return torch.compiler.is_compiling
