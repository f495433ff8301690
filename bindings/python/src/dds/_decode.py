"""Sampler.reveal and Sampler.verify_drafts (dds_reveal, dds_verify_drafts; docs/decoding.md),
a base class of dds.Sampler that uses its shared helpers (_first_ctx, _rows_and_requests, ...)."""

from __future__ import annotations

import functools
from typing import Any, Iterable, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import _dds
from ._arrays import (DTYPE_CODES, ArrayInfo, CallContext, allowed_masks, check_device, describe,
                      host_convert, is_host_sequence, is_scalar, matrix, out_block, vector)
from ._sample import LOGIT_DTYPES as _LOGIT_DTYPES
from ._sample import check_float as _check_float
from ._sample import check_int as _check_int

ArrayLike = Any
Scalar = Union[int, float]


def _scalar_value(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.item()
    return value


class RevealResult(NamedTuple):
    """Outputs of Sampler.reveal."""

    reveal: Any = None  # [num_rows] uint8: 1 = revealed
    num_revealed: Any = None  # [num_requests] int32
    finished: Any = None  # [num_requests] int32 (EOS rule)
    request_status: Any = None  # [num_requests] int32


class VerifyResult(NamedTuple):
    """Outputs of Sampler.verify_drafts."""

    accepted_counts: Any = None  # [num_requests] int32
    tokens: Any = None  # [num_requests, num_drafts + 1] int32, padded with -1
    logprobs: Any = None  # [num_requests, num_drafts + 1] float32, padded with -inf
    request_status: Any = None  # [num_requests] int32


REVEAL_OUTPUTS = ("reveal", "num_revealed", "finished", "request_status")
VERIFY_OUTPUTS = ("accepted_counts", "tokens", "logprobs", "request_status")
REVEAL_POLICIES = {"top_n": 0, "threshold": 1, "factor": 2, "random": 3, "entropy_bound": 4}

# Set by dds._torch_ops.register (torch.compile): torch.compiler.is_compiling and the call that
# maps reveal / verify_drafts / stash_logprobs onto torch.ops.dds.* (given the method's name,
# self, and its positional and keyword arguments); None before.
_torch_compiling: Any = None
_torch_traced: Any = None


def traceable(name: str) -> Any:
    """Decorates Sampler.<name> (reveal, verify_drafts, stash_logprobs): while torch.compile
    traces, the call goes to torch.ops.dds.* through _torch_traced with the arguments as given
    (dynamo traces *args / **kwargs; it cannot trace locals()); else to the method itself."""
    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _torch_compiling is not None and _torch_compiling():
                return _torch_traced(name, self, args, kwargs)
            return fn(self, *args, **kwargs)
        return method
    return wrap


class DecodeCalls:
    """The decode-step calls of dds.Sampler."""

    # -- reveal ---------------------------------------------------------------------------------
    @traceable("reveal")
    def reveal(self, scores: ArrayLike, *,
               row_offsets: Optional[ArrayLike] = None,
               positions: Optional[ArrayLike] = None,
               eligible: Optional[ArrayLike] = None,
               policy: Union[str, int, ArrayLike] = "top_n",
               count: Union[int, ArrayLike] = 1,
               steps_left: Union[None, int, ArrayLike] = None,
               threshold: Union[Scalar, ArrayLike] = 0.9,
               factor: Union[Scalar, ArrayLike] = 1.0,
               entropy_bound: Union[Scalar, ArrayLike] = 0.1,
               position_temperature: Union[Scalar, ArrayLike] = 0.0,
               seed: Union[int, ArrayLike] = 0,
               step: Union[int, ArrayLike] = 0,
               canvas: Optional[ArrayLike] = None,
               tokens: Optional[ArrayLike] = None,
               mask_token: int = -1,
               eos_token: int = -1,
               outputs: Iterable[str] = ("reveal",),
               out_reveal: Optional[ArrayLike] = None,
               out_num_revealed: Optional[ArrayLike] = None,
               out_finished: Optional[ArrayLike] = None,
               out_request_status: Optional[ArrayLike] = None,
               stream: Any = None) -> RevealResult:
        """Which positions to commit this step (dds_reveal; docs/decoding.md).

        `scores` is one float32 per row (e.g. SampleResult.confidence), rows packed per request
        as in sample(). policy: "top_n" (count, or ceil(eligible / steps_left) when count <= 0),
        "threshold", "factor" (Fast-dLLM), "random" or "entropy_bound" (EB-sampler: `scores`
        are entropies, lower first; the longest prefix whose entropies less the largest sum to
        <= entropy_bound), per request as a name / int or an int32 array. With `canvas` ([num_requests, >= canvas_length] int32, written in place) and
        `tokens` ([num_rows] int32) the revealed tokens are written at their positions and the
        EOS rule (eos_token >= 0, mask_token) sets `finished`. The `reveal` output ([num_rows]
        uint8) is always produced.

        Parameters
        ----------
        scores : array of num_rows float32
            One score per row.
        row_offsets, positions : arrays, optional
            As in sample().
        eligible : array of num_rows uint8 / bool, optional
            Rows that may be revealed (None: all).
        policy : str, int or array
            "top_n", "threshold", "factor", "random" or "entropy_bound", per request or for
            all.
        count, steps_left, threshold, factor, entropy_bound, position_temperature, seed, step : scalar or array
            The policies' per-request values (docs/decoding.md).
        canvas : array [num_requests, canvas_length] int32, optional
            Written in place with `tokens` at the revealed positions.
        tokens : array of num_rows int32, optional
            The token of each row (with `canvas`).
        mask_token, eos_token : int
            The EOS rule's tokens (-1: none).
        outputs : iterable of str
            reveal, num_revealed, finished, request_status.
        out_reveal, out_num_revealed, out_finished, out_request_status : array, optional
            Written in place instead of allocated.
        stream : optional
            CUDA stream as in sample().

        Returns
        -------
        RevealResult
        """
        h = self._live()
        ctx, sinfo = self._first_ctx(scores, "scores", stream)
        sptr, sinfo = vector(sinfo.obj, "scores", ctx, "float32", None)
        num_rows = sinfo.shape[0]
        ptr, R, _ = self._rows_and_requests("scores", num_rows, row_offsets, ctx)
        a = _dds.dds_reveal_args()
        a.num_rows = num_rows
        a.scores = sptr
        a.row_offsets = ptr
        a.num_requests = max(R, 1)
        if positions is not None:
            a.positions = vector(positions, "positions", ctx, "int32", num_rows)[0]
        if eligible is not None:
            a.eligible = vector(eligible, "eligible", ctx, "uint8", num_rows, ("bool",))[0]

        if isinstance(policy, str):
            if policy.lower() not in REVEAL_POLICIES:
                raise ValueError(f"policy: must be one of {tuple(REVEAL_POLICIES)}, got "
                                 f"{policy!r}")
            policy = REVEAL_POLICIES[policy.lower()]
        elif is_host_sequence(policy) and any(isinstance(p, str) for p in policy):  # type: ignore
            try:
                policy = [REVEAL_POLICIES[p.lower()] if isinstance(p, str) else p
                          for p in policy]  # type: ignore[union-attr]
            except KeyError as e:
                raise ValueError(f"policy: unknown policy {e.args[0]!r}; choose from "
                                 f"{tuple(REVEAL_POLICIES)}") from None
        self._request_param(a, policy, "policy", "policies", "policy", "int32", ctx, R,
                            lambda v, n: _check_int(v, n, 0, 4), default=0)
        self._request_param(a, count, "count", "counts", "count", "int32", ctx, R,
                            lambda v, n: _check_int(v, n, -(2 ** 31), 2 ** 31 - 1), default=1)
        if steps_left is not None:
            if is_scalar(steps_left):
                steps_left = [_check_int(_scalar_value(steps_left), "steps_left", -(2 ** 31),
                                         2 ** 31 - 1)] * R
            a.steps_left = vector(steps_left, "steps_left", ctx, "int32", R)[0]
        self._request_param(a, threshold, "threshold", "thresholds", "threshold", "float32",
                            ctx, R, _check_float)
        self._request_param(a, factor, "factor", "factors", "factor", "float32", ctx, R,
                            _check_float, default=1.0)
        self._request_param(a, entropy_bound, "entropy_bound", "entropy_bounds",
                            "entropy_bound", "float32", ctx, R, _check_float, default=0.1)
        self._request_param(a, position_temperature, "position_temperature",
                            "position_temperatures", "position_temperature", "float32", ctx, R,
                            _check_float, default=0.0)
        self._request_param(a, seed, "seed", "seeds", "seed", "uint64", ctx, R,
                            lambda v, n: _check_int(v, n, 0, 2 ** 64 - 1), ("int64",), 0)
        self._request_param(a, step, "step", "steps", "step", "uint32", ctx, R,
                            lambda v, n: _check_int(v, n, 0, 2 ** 32 - 1), ("int32",), 0)
        a.mask_token = _check_int(mask_token, "mask_token", -(2 ** 31), 2 ** 31 - 1)
        a.eos_token = _check_int(eos_token, "eos_token", -(2 ** 31), 2 ** 31 - 1)
        if canvas is not None:
            cinfo = describe(canvas, "canvas")
            if cinfo is None:
                raise TypeError(f"canvas: expected a 2-D int32 array, got {type(canvas).__name__}")
            check_device(cinfo, "canvas", ctx)
            if cinfo.dtype != "int32":
                raise TypeError(f"canvas: dtype must be int32, got {cinfo.dtype}")
            if len(cinfo.shape) != 2 or cinfo.shape[0] != R:
                raise ValueError(f"canvas: expected shape [num_requests={R}, canvas_length], got "
                                 f"{cinfo.shape}")
            if cinfo.shape[1] > 1 and cinfo.strides[1] != 1:
                raise ValueError(f"canvas: column stride must be 1, got strides {cinfo.strides}")
            cstride = cinfo.strides[0] if cinfo.shape[0] > 1 else cinfo.shape[1]
            if cstride < cinfo.shape[1]:
                raise ValueError(f"canvas: row stride {cstride} is smaller than the row length")
            if cinfo.lib == "numpy" and not cinfo.obj.flags.writeable:
                raise ValueError("canvas: array is read-only")
            a.canvas = cinfo.ptr
            a.canvas_length = cinfo.shape[1]
            a.canvas_stride = cstride
            if tokens is None:
                raise ValueError("tokens: required with canvas (the token of each row)")
        if tokens is not None:
            if canvas is None:
                raise ValueError("tokens: given without canvas (nothing to write them into)")
            a.tokens = vector(tokens, "tokens", ctx, "int32", num_rows)[0]

        wanted = self._wanted(outputs, REVEAL_OUTPUTS)
        wanted.add("reveal")
        res: dict = {}
        a.reveal = self._out("reveal", out_reveal, wanted, ctx, "uint8", (num_rows,), res,
                             alt=("bool",))
        for key, given in (("num_revealed", out_num_revealed), ("finished", out_finished),
                           ("request_status", out_request_status)):
            p = self._out(key, given, wanted, ctx, "int32", (R,), res)
            if p is not None:
                setattr(a, key, p)
        with self._lock:
            if self._handle is None:
                raise _dds.Error("dds.Sampler: the sampler is closed")
            _dds.dds_reveal(h, a, ctx.stream)
        ctx.keep.clear()
        return RevealResult(**res)

    # -- verify ---------------------------------------------------------------------------------
    def _rows(self, obj: Any, name: str, ctx: CallContext, rows: int,
              dtype: Any) -> Tuple[ArrayInfo, str, int]:
        """[rows, V] or [R, k, V] (k rows per request, uniformly strided) logits."""
        info = describe(obj, name)
        if info is None:
            raise TypeError(f"{name}: expected an array, got {type(obj).__name__}")
        if len(info.shape) == 3:
            r, k, v = info.shape
            if k > 1 and r > 1 and info.strides[0] != k * info.strides[1]:
                raise ValueError(f"{name}: [R, k, V] layout needs strides[0] == k * strides[1], "
                                 f"got strides {info.strides}")
            flat = ArrayInfo(info.ptr, (r * k, v),
                             (info.strides[1] if k > 1 else info.strides[0], info.strides[2]),
                             info.dtype, info.device, info.lib, info.obj)
            info = flat
        info, dt, stride = matrix(obj, name, ctx, self.vocab_size, _LOGIT_DTYPES, dtype,
                                  rows=rows, info=info)
        return info, dt, stride

    @traceable("verify_drafts")
    def verify_drafts(self, target_logits: ArrayLike, draft_logits: Optional[ArrayLike] = None,
                      draft_tokens: Optional[ArrayLike] = None, *,
                      draft_counts: Optional[ArrayLike] = None,
                      temperature: Union[Scalar, ArrayLike] = 1.0,
                      top_k: Union[int, ArrayLike] = 0,
                      top_p: Union[Scalar, ArrayLike] = 1.0,
                      min_p: Union[Scalar, ArrayLike] = 0.0,
                      seed: Union[int, ArrayLike] = 0,
                      step: Union[int, ArrayLike] = 0,
                      banned_token: Optional[int] = -1,
                      dtype: Any = None,
                      outputs: Iterable[str] = ("accepted_counts", "tokens"),
                      out_accepted_counts: Optional[ArrayLike] = None,
                      out_tokens: Optional[ArrayLike] = None,
                      out_logprobs: Optional[ArrayLike] = None,
                      out_request_status: Optional[ArrayLike] = None,
                      stream: Any = None,
                      allowed_token_masks: Optional[ArrayLike] = None) -> VerifyResult:
        """Exact speculative verification (dds_verify_drafts; docs/decoding.md).

        draft_tokens: [num_requests, n] int32 (n = drafts per request); draft_logits:
        [num_requests * n, V] (or [num_requests, n, V]); target_logits: [num_requests * (n+1),
        V] (or [num_requests, n + 1, V]). With n = 0, draft_logits / draft_tokens may be None and
        num_requests = rows of target_logits. Outputs: accepted_counts [R] and tokens [R, n + 1]
        (always produced), logprobs [R, n + 1], request_status [R].

        Parameters
        ----------
        target_logits, draft_logits : arrays
            The target and draft models' rows (shapes above; one dtype).
        draft_tokens : array [num_requests, n] int32, optional
            The drafted tokens.
        draft_counts : array of num_requests int32, optional
            Drafts per request (<= n; None: n).
        temperature, top_k, top_p, min_p, seed, step : scalar or array
            Per-request values as in sample().
        banned_token : int, optional
            As in sample().
        allowed_token_masks : int32 array [num_requests, words] or [words], optional
            As in sample(); a request's mask applies to its draft and target rows.
        dtype : str, optional
            The logits' dtype for raw 16-bit words.
        outputs : iterable of str
            accepted_counts, tokens, logprobs, request_status.
        out_accepted_counts, out_tokens, out_logprobs, out_request_status : array, optional
            Written in place instead of allocated.
        stream : optional
            CUDA stream as in sample().

        Returns
        -------
        VerifyResult
        """
        h = self._live()
        tinfo0 = describe(target_logits, "target_logits")
        if tinfo0 is None:
            raise TypeError(f"target_logits: expected an array, got "
                            f"{type(target_logits).__name__}")
        ctx = self._context(tinfo0, stream)
        if draft_tokens is None:
            if draft_logits is not None:
                raise ValueError("draft_tokens: required with draft_logits")
            n = 0
            R = tinfo0.shape[0] if len(tinfo0.shape) == 2 else tinfo0.shape[0]
        else:
            dinfo = None if is_host_sequence(draft_tokens) else describe(draft_tokens,
                                                                         "draft_tokens")
            if dinfo is None or dinfo.on_host:
                dt_host = host_convert(draft_tokens, "draft_tokens", "int32")
                shape = dt_host.shape
            else:
                dt_host = None
                shape = dinfo.shape
            if len(shape) != 2:
                raise ValueError(f"draft_tokens: expected shape [num_requests, num_drafts], got "
                                 f"{shape}")
            R, n = shape
        if R < 1 and (draft_tokens is not None or tinfo0.shape[0] > 0):
            raise ValueError("draft_tokens: needs at least one request")
        if R > self.max_requests:
            raise ValueError(f"draft_tokens: {R} requests exceed the sampler's max_requests "
                             f"({self.max_requests})")
        a = _dds.dds_verify_args()
        a.num_requests = max(R, 1)
        a.num_drafts = n
        tinfo, tdt, tstride = self._rows(target_logits, "target_logits", ctx, R * (n + 1), dtype)
        a.target_logits = tinfo.ptr
        a.target_row_stride = tstride
        a.dtype = DTYPE_CODES[tdt]
        if n > 0:
            if draft_logits is None:
                raise ValueError("draft_logits: required when there are drafts")
            dl, ddt, dstride = self._rows(draft_logits, "draft_logits", ctx, R * n, dtype)
            if ddt != tdt:
                raise TypeError(f"draft_logits: dtype {ddt} differs from target_logits' {tdt}")
            a.draft_logits = dl.ptr
            a.draft_row_stride = dstride
            src = dt_host.reshape(-1) if dt_host is not None else draft_tokens
            if dt_host is None:
                a.draft_tokens = out_block(draft_tokens, "draft_tokens", ctx, "int32", R * n).ptr
            else:
                a.draft_tokens = vector(src, "draft_tokens", ctx, "int32", R * n)[0]
        if draft_counts is not None:
            a.draft_counts = vector(draft_counts, "draft_counts", ctx, "int32", R)[0]
        self._request_param(a, temperature, "temperature", "temperatures", "temperature",
                            "float32", ctx, R, _check_float, default=1.0)
        self._request_param(a, top_k, "top_k", "top_ks", "top_k", "int32", ctx, R,
                            lambda v, nm: _check_int(v, nm, -(2 ** 31), 2 ** 31 - 1), default=0)
        self._request_param(a, top_p, "top_p", "top_ps", "top_p", "float32", ctx, R,
                            _check_float, default=1.0)
        self._request_param(a, min_p, "min_p", "min_ps", "min_p", "float32", ctx, R,
                            _check_float, default=0.0)
        self._request_param(a, seed, "seed", "seeds", "seed", "uint64", ctx, R,
                            lambda v, nm: _check_int(v, nm, 0, 2 ** 64 - 1), ("int64",), 0)
        self._request_param(a, step, "step", "steps", "step", "uint32", ctx, R,
                            lambda v, nm: _check_int(v, nm, 0, 2 ** 32 - 1), ("int32",), 0)
        a.banned_token = _check_int(-1 if banned_token is None else banned_token,
                                    "banned_token", -1, self.vocab_size - 1)
        if allowed_token_masks is not None:
            a.allowed_token_masks, a.allowed_mask_stride = allowed_masks(
                allowed_token_masks, ctx, max(R, 1), self.vocab_size)
        wanted = self._wanted(outputs, VERIFY_OUTPUTS)
        wanted.update(("accepted_counts", "tokens"))
        res: dict = {}
        a.accepted_counts = self._out("accepted_counts", out_accepted_counts, wanted, ctx,
                                      "int32", (R,), res)
        a.out_tokens = self._out("tokens", out_tokens, wanted, ctx, "int32", (R, n + 1), res)
        p = self._out("logprobs", out_logprobs, wanted, ctx, "float32", (R, n + 1), res)
        if p is not None:
            a.out_logprobs = p
        p = self._out("request_status", out_request_status, wanted, ctx, "int32", (R,), res)
        if p is not None:
            a.request_status = p
        with self._lock:
            if self._handle is None:
                raise _dds.Error("dds.Sampler: the sampler is closed")
            _dds.dds_verify_drafts(h, a, ctx.stream)
        ctx.keep.clear()
        return VerifyResult(**res)
