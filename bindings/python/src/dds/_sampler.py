"""dds.Sampler: the Pythonic layer over the raw SWIG module dds._dds."""

from __future__ import annotations

import sys
import inspect
import itertools
import threading
import weakref
from typing import (TYPE_CHECKING, Any, Dict, Iterable, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import numpy as np

from . import _dds
from ._arrays import (
    DTYPE_CODES,
    ArrayInfo,
    CallContext,
    alloc_lib_for,
    allowed_masks,
    check_device,
    describe,
    host_convert,
    is_host_sequence,
    is_scalar,
    matrix,
    out_block,
    out_vector,
    resolve_stream,
    vector,
)
# Re-exported: the result types and names of every call live here for dds/__init__.py.
from ._decode import (REVEAL_OUTPUTS, REVEAL_POLICIES, VERIFY_OUTPUTS, traceable,  # noqa: F401
                      DecodeCalls, RevealResult, VerifyResult, _scalar_value)
from ._sample import (LOGIT_DTYPES, MAX_PLANS, PLAN_SLOTS, SAMPLE_OUTPUTS,  # noqa: F401
                      build_sample_args, check_float, check_int, make_plan, result_tuple)

if TYPE_CHECKING:  # pragma: no cover
    from ._shard import ShardCall, ShardPlan

ArrayLike = Any  # numpy.ndarray | torch.Tensor | cupy.ndarray | list (small arrays only)
Scalar = Union[int, float]

STASH_OUTPUTS = ("token_ids", "logprobs", "ranks", "request_status")

_LOGIT_DTYPES = LOGIT_DTYPES


class SampleResult(NamedTuple):
    """Outputs of Sampler.sample; an output that was not asked for is None. Arrays are of the
    logits' library (numpy / torch / CuPy) on the logits' device."""

    tokens: Any = None  # [num_rows] int32
    logprobs: Any = None  # [num_rows] float32
    argmax: Any = None  # [num_rows] int32
    confidence: Any = None  # [num_rows] float32
    margin: Any = None  # [num_rows] float32
    entropy: Any = None  # [num_rows] float32
    probs: Any = None  # [num_rows, vocab] probs_dtype
    request_status: Any = None  # [num_requests] int32 DDS_REQ_* bits


class StashResult(NamedTuple):
    """Outputs of Sampler.stash_logprobs, each [num_slots, rows_per_slot, num_top + 1]."""

    token_ids: Any = None  # int32
    logprobs: Any = None  # float32
    ranks: Any = None  # int32
    request_status: Any = None  # [num_requests] int32


_BACKENDS = {"cpu": _dds.DDS_BACKEND_CPU, "cuda": _dds.DDS_BACKEND_CUDA}


_FAST_SCALARS = (int, float)
_sample_planned = _dds.dds_py_sample_planned

# torch.compiler.is_compiling once torch is loaded and dds's custom ops are registered
# (enable_torch); None before. Read by Sampler.sample on every call (reveal, verify_drafts and
# stash_logprobs read _decode's, which dds._torch_ops.register sets with it).
_torch_compiling: Any = None
_torch_traced_sample: Any = None  # dds._torch_ops.traced_sample, set with _torch_compiling
_IDS = itertools.count(1)
_LIVE: Dict[int, Any] = {}  # sampler id -> weakref (for the torch custom ops)


def enable_torch() -> None:
    """Registers the torch custom ops (torch.ops.dds.*) and routes Sampler.sample, reveal,
    verify_drafts and stash_logprobs through them while torch.compile traces. Done at
    `import dds` when torch is already imported, and at Sampler creation otherwise."""
    global _torch_compiling
    if _torch_compiling is None:
        from . import _torch_ops

        _torch_compiling = _torch_ops.register()


def sampler_by_id(op_id: int) -> "Sampler":
    """The live Sampler of a custom op's sampler id."""
    ref = _LIVE.get(op_id)
    s = ref() if ref is not None else None
    if s is None:
        raise _dds.Error(f"dds: sampler id {op_id} is closed or was never created")
    return s


def has_cuda() -> bool:
    """Whether this build of libdds has the CUDA backend.

    Returns
    -------
    bool
        True if the CUDA backend was compiled in (a device may still be missing).
    """
    return bool(_dds.dds_has_cuda())


_check_int = check_int
_check_float = check_float


class Sampler(DecodeCalls):
    """A dds sampler: scratch space sized at creation for `vocab_size` columns and the given
    capacities, on the CPU backend (numpy / CPU tensors, synchronous) or the CUDA backend
    (CUDA tensors / CuPy arrays, queued on the current stream).

    Use as a context manager or call close(); any use after close raises dds.Error.
    One sampler must not be used by two threads at once (dds raises DDS_ERR_BUSY).
    """

    def __init__(self, vocab_size: int, *, backend: str = "cpu", device: int = 0,
                 max_rows: int = 4096, max_requests: int = 1024, max_stash_width: int = 20,
                 debug: bool = False, num_threads: int = 0) -> None:
        self._handle: Any = None
        if not isinstance(backend, str) or backend.lower() not in _BACKENDS:
            raise ValueError(f"backend: must be 'cpu' or 'cuda', got {backend!r}")
        self.backend: str = backend.lower()
        self.vocab_size: int = _check_int(vocab_size, "vocab_size", 1, 2 ** 31 - 1)
        self.device: int = _check_int(device, "device", 0, 2 ** 31 - 1)
        self.max_rows: int = _check_int(max_rows, "max_rows", 1, 2 ** 31 - 1)
        self.max_requests: int = _check_int(max_requests, "max_requests", 1, 2 ** 31 - 1)
        self.max_stash_width: int = _check_int(max_stash_width, "max_stash_width", 0, 1024)
        self.debug: bool = bool(debug)
        # CPU backend: threads sharing a call's rows (0 = default, 1 = single-threaded).
        self.num_threads: int = _check_int(num_threads, "num_threads", 0, 256)
        cfg = _dds.dds_sampler_config()
        cfg.backend = _BACKENDS[self.backend]
        cfg.device = self.device
        cfg.vocab_size = self.vocab_size
        cfg.max_rows = self.max_rows
        cfg.max_requests = self.max_requests
        cfg.max_stash_width = self.max_stash_width
        cfg.flags = _dds.DDS_FLAG_DEBUG_CHECKS if self.debug else 0
        cfg.num_threads = self.num_threads
        self._lock = threading.Lock()
        self._sargs = _dds.dds_sample_args()  # reused by sample(), reset per call
        self._plans: list = []  # sample()'s plans (dds_py_plan_new capsules), newest first
        self._handle = _dds.dds_create(cfg)
        # The id torch custom ops name this sampler by (dds._torch_ops; torch.compile).
        self._op_id: int = next(_IDS)
        _LIVE[self._op_id] = weakref.ref(self)
        if _torch_compiling is None and "torch" in sys.modules:
            enable_torch()

    # -- lifetime -------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        """Destroys the sampler (idempotent).

        On the CUDA backend the sampler's device is synchronised first (through torch or CuPy
        when loaded), since work queued with this sampler must have finished before its
        scratch space is freed.

        Returns
        -------
        None
        """
        lock = getattr(self, "_lock", None)
        if lock is None or self._handle is None:
            return
        with lock:
            h, self._handle = self._handle, None
            if h is None:
                return
            self._plans.clear()  # they hold the raw handle
            if self.backend == "cuda":
                _synchronize(self.device)
            _dds.dds_destroy(h)
            _LIVE.pop(getattr(self, "_op_id", 0), None)

    def __enter__(self) -> "Sampler":
        self._live()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if getattr(self, "_handle", None) is not None:
                self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        dev = f", device={self.device}" if self.backend == "cuda" else ""
        return (f"dds.Sampler(vocab_size={self.vocab_size}, backend={self.backend!r}{dev}, "
                f"max_rows={self.max_rows}, max_requests={self.max_requests}, "
                f"max_stash_width={self.max_stash_width}) [{state}]")

    def _live(self) -> Any:
        h = self._handle
        if h is None:
            raise _dds.Error("dds.Sampler: the sampler is closed")
        return h

    # -- shared helpers -------------------------------------------------------------------------
    def _context(self, logits_info: ArrayInfo, stream: Any) -> CallContext:
        if self.backend == "cpu":
            if stream is not None:
                raise ValueError("stream: the cpu backend runs synchronously; pass stream=None")
            return CallContext("cpu", 0, "torch" if logits_info.lib == "torch" else "numpy", 0,
                               False)
        lib = alloc_lib_for(logits_info, self.backend)
        s, given = resolve_stream(stream, lib, self.device)
        return CallContext("cuda", self.device, lib, s, given)

    def _request_param(self, args: Any, value: Any, scalar_field: str, array_field: str,
                       name: str, dtype: str, ctx: CallContext, num_requests: int,
                       conv: Any, alt_dtypes: Sequence[str] = (), default: Any = None) -> None:
        if type(value) in _FAST_SCALARS:
            if value == default and type(value) is type(default):
                return  # the C default from dds_*_args_init
            setattr(args, scalar_field, conv(value, name))
            return
        value = _scalar_value(value) if isinstance(value, np.ndarray) and value.ndim == 0 else value
        if is_scalar(value):
            setattr(args, scalar_field, conv(value, name))
        else:
            ptr, _ = vector(value, name, ctx, dtype, num_requests, alt_dtypes)
            setattr(args, array_field, ptr)

    def _rows_and_requests(self, name: str, num_rows: int, row_offsets: Any,
                           ctx: CallContext) -> Tuple[int, int, Optional[np.ndarray]]:
        """The preamble of sample / stash_logprobs / reveal: `num_rows` rows of the array
        `name` within max_rows, then row_offsets read (_row_offsets) and its requests within
        max_requests; returns _row_offsets' (pointer or 0, num_requests, host copy)."""
        if num_rows > self.max_rows:
            raise ValueError(f"{name}: {num_rows} rows exceed the sampler's max_rows "
                             f"({self.max_rows})")
        ptr, R, host = self._row_offsets(row_offsets, num_rows, ctx)
        if num_rows and R > self.max_requests:
            raise ValueError(f"row_offsets: {R} requests exceed the sampler's max_requests "
                             f"({self.max_requests})")
        return ptr, R, host

    def _row_offsets(self, row_offsets: Any, num_rows: int, ctx: CallContext,
                     name: str = "row_offsets") -> Tuple[int, int, Optional[np.ndarray]]:
        """(pointer or 0, num_requests, host copy when known)."""
        if row_offsets is None:
            return 0, num_rows, None
        info = None if is_host_sequence(row_offsets) else describe(row_offsets, name)
        host: Optional[np.ndarray] = None
        if info is None or info.on_host:
            host = host_convert(row_offsets, name, "int32")
            if host.ndim != 1 or host.shape[0] < 2:
                raise ValueError(f"{name}: expected a 1-D array of num_requests + 1 >= 2 "
                                 f"offsets, got shape {host.shape}")
            if host[0] != 0:
                raise ValueError(f"{name}: {name}[0] must be 0, got {host[0]}")
            d = np.diff(host.astype(np.int64))
            if np.any(d < 0):
                r = int(np.argmax(d < 0))
                raise ValueError(f"{name}: must be non-decreasing ({name}[{r + 1}] = "
                                 f"{host[r + 1]} < {name}[{r}] = {host[r]})")
            if host[-1] != num_rows:
                raise ValueError(f"{name}: last offset ({host[-1]}) must equal the number of "
                                 f"rows ({num_rows})")
            src: Any = host if info is None or info.dtype != "int32" else row_offsets
        else:
            src = row_offsets
        if info is not None and not info.on_host and len(info.shape) != 1:
            raise ValueError(f"{name}: expected a 1-D array, got shape {info.shape}")
        length = None if host is None else host.shape[0]
        ptr, ainfo = vector(src, name, ctx, "int32", length)
        if ainfo.shape[0] < 2:
            raise ValueError(f"{name}: expected num_requests + 1 >= 2 offsets, got "
                             f"{ainfo.shape[0]}")
        return ptr, ainfo.shape[0] - 1, host

    # -- sample ---------------------------------------------------------------------------------
    def sample(self, logits: ArrayLike, *,
               row_offsets: Optional[ArrayLike] = None,
               positions: Optional[ArrayLike] = None,
               uncond_logits: Optional[ArrayLike] = None,
               uncond_row_offsets: Optional[ArrayLike] = None,
               guidance_scale: Union[Scalar, ArrayLike] = 0.0,
               temperature: Union[Scalar, ArrayLike] = 1.0,
               top_k: Union[int, ArrayLike] = 0,
               top_p: Union[Scalar, ArrayLike] = 1.0,
               min_p: Union[Scalar, ArrayLike] = 0.0,
               seed: Union[int, ArrayLike] = 0,
               step: Union[int, ArrayLike] = 0,
               banned_token: Optional[int] = -1,
               stats: Union[str, int] = "processed",
               outputs: Iterable[str] = ("tokens",),
               dtype: Any = None,
               probs_dtype: Any = None,
               out_tokens: Optional[ArrayLike] = None,
               out_logprobs: Optional[ArrayLike] = None,
               out_argmax: Optional[ArrayLike] = None,
               out_confidence: Optional[ArrayLike] = None,
               out_margin: Optional[ArrayLike] = None,
               out_entropy: Optional[ArrayLike] = None,
               out_probs: Optional[ArrayLike] = None,
               out_request_status: Optional[ArrayLike] = None,
               stream: Any = None,
               allowed_token_masks: Optional[ArrayLike] = None) -> SampleResult:
        """One sampling step over every row of `logits` (dds_sample; docs/sampling.md).

        Parameters
        ----------
        logits : array [num_rows, vocab_size]
            float32, bfloat16 or float16; columns contiguous, any row stride. numpy / CPU
            tensors on the cpu backend, CUDA tensors / CuPy arrays on cuda.
        row_offsets : array of num_requests + 1 int32, optional
            Request r owns rows row_offsets[r] .. row_offsets[r+1] - 1. None: one row per
            request.
        positions : array of num_rows int32, optional
            Canvas position of each row (keys the random numbers). None: the row's index in
            its request.
        uncond_logits : array [uncond_rows, vocab_size], optional
            Unconditional rows for classifier-free guidance (same dtype as `logits`).
        uncond_row_offsets : array of num_requests int32, optional
            First uncond row of each request, or -1 (unguided). None: `uncond_logits` mirrors
            the rows of `logits`.
        guidance_scale, temperature, top_k, top_p, min_p, seed, step : scalar or array
            Per-request values: one Python scalar for every request, or an array of
            num_requests values (float32; top_k int32; seed uint64 or int64; step uint32 or
            int32). Host arrays are converted with range checks (copied to the device on
            cuda); device arrays must have the dtype already. temperature 0 is greedy.
        banned_token : int, optional
            A token never sampled nor counted (the mask token); -1 or None for none.
        stats : {"processed", "guided"}
            Distribution of the statistics: after temperature and filters, or after guidance
            only.
        outputs : iterable of str
            Outputs to allocate: tokens, logprobs, argmax, confidence, margin, entropy, probs,
            request_status.
        dtype : str or dtype, optional
            The logits' dtype when the array holds raw 16-bit words ("bfloat16", "float16").
        probs_dtype : str or dtype, optional
            dtype of the `probs` output (default float32).
        out_tokens, out_logprobs, out_argmax, out_confidence, out_margin, out_entropy, out_probs, out_request_status : array, optional
            Arrays written in place (and returned as given) instead of allocated ones.
        stream : int, torch.cuda.Stream or cupy.cuda.Stream, optional
            CUDA stream of the call; None: the current stream of the logits' library. Must be
            None on the cpu backend.
        allowed_token_masks : int32 array [num_requests, words] or [words], optional
            Allowed token sets as packed bitmasks (xgrammar's layout: token t is allowed when
            bit t % 32 of word t // 32 is set; words >= ceil(vocab_size / 32)). A disallowed
            token is treated as -inf, like banned_token. None: every token allowed.

        Returns
        -------
        SampleResult
            The outputs (arrays of the logits' library on its device); None for an output not
            asked for.

        Raises
        ------
        TypeError, ValueError
            A bad argument, named in the message, before anything runs.
        dds.ArgumentError, dds.Error
            The library rejected the call (message: dds_last_error()).
        """
        if _torch_compiling is not None and _torch_compiling():
            return _torch_traced_sample(
                self, logits, row_offsets, positions, uncond_logits, uncond_row_offsets,
                guidance_scale, temperature, top_k, top_p, min_p, seed, step, banned_token,
                stats, outputs, dtype, probs_dtype, out_tokens, out_logprobs, out_argmax,
                out_confidence, out_margin, out_entropy, out_probs, out_request_status, stream,
                allowed_token_masks)
        with self._lock:  # a plan of an earlier call that matches every argument (_sample.py)
            done = _sample_planned(self._plans, (
                logits, row_offsets, positions, uncond_logits, uncond_row_offsets,
                guidance_scale, temperature, top_k, top_p, min_p, seed, step, banned_token,
                stats, outputs, dtype, probs_dtype, out_tokens, out_logprobs, out_argmax,
                out_confidence, out_margin, out_entropy, out_probs, out_request_status, stream,
                allowed_token_masks))
        if done is not None:
            return tuple.__new__(SampleResult, done)
        del done
        return self._sample_kw(logits, locals())

    def _sample_kw(self, logits: ArrayLike, kw: Dict[str, Any]) -> SampleResult:
        """sample() with its keywords as a dict holding every keyword (its locals()); leaves
        the call's plan for the next ones."""
        with self._lock:
            h = self._handle
            if h is None:
                raise _dds.Error("dds.Sampler: the sampler is closed")
            a = self._sargs
            a.reset()
            res, ctx = build_sample_args(self, None, logits, kw, a)
            _dds.dds_sample(h, a, ctx.stream)
            plan = make_plan(self, logits, kw, a, res, ctx)
            if plan is not None:
                plans = self._plans
                plans.insert(0, plan)
                del plans[MAX_PLANS:]
        return tuple.__new__(SampleResult, result_tuple(res))

    def _sample_args(self, shard_cols: Optional[int], logits: ArrayLike,
                     kwargs: Dict[str, Any]) -> Tuple[Any, dict, CallContext]:
        """A new dds_sample_args for `logits` and sample()'s keywords `kwargs` (defaults filled
        in), for the whole row (shard_cols None) or a vocabulary slice of shard_cols columns;
        returns (args, outputs by name, call context)."""
        a = _dds.dds_sample_args()
        res, ctx = build_sample_args(self, shard_cols, logits, sample_keywords(kwargs), a)
        return a, res, ctx

    # -- vocabulary-parallel (dds_shard.h) ------------------------------------------------------
    def shard_call(self, logits: ArrayLike, *, rank: int = 0, world_size: int = 1,
                   vocab_offset: int = 0, max_top_k: int = 64,
                   **sample_kwargs: Any) -> "ShardCall":
        """One rank's vocabulary-parallel call (docs/vocab_parallel.md): `logits` is this rank's
        slice [rows, vocab_slice] of the global columns [vocab_offset, vocab_offset +
        vocab_slice) of vocab_size; the other keyword arguments are those of sample() (the same
        on every rank; uncond_logits is this rank's slice of the same columns, out_probs its
        slice of the probability rows). Returns a dds.ShardCall: .plan, .partial(gathered,
        record_out, round) per round, .finish(gathered) -> SampleResult."""
        from ._shard import ShardCall

        return ShardCall(self, logits, rank=rank, world_size=world_size,
                         vocab_offset=vocab_offset, max_top_k=max_top_k, **sample_kwargs)

    def shard_plan(self, logits: ArrayLike, *, rank: int = 0, world_size: int = 1,
                   vocab_offset: int = 0, max_top_k: int = 64,
                   **sample_kwargs: Any) -> "ShardPlan":
        """dds_sample_shard_plan: the rounds and buffer sizes (a dds.ShardPlan) of the sharded
        call with these arguments (see shard_call)."""
        return self.shard_call(logits, rank=rank, world_size=world_size,
                               vocab_offset=vocab_offset, max_top_k=max_top_k,
                               **sample_kwargs).plan

    def sample_partial(self, logits: ArrayLike, gathered: Optional[ArrayLike],
                       record_out: ArrayLike, *, round: int, rank: int = 0,
                       world_size: int = 1, vocab_offset: int = 0, max_top_k: int = 64,
                       **sample_kwargs: Any) -> Any:
        """dds_sample_partial: this rank's record of round `round` into record_out (uint8,
        >= plan.record_bytes[round] bytes, 8-byte aligned); returns the record's view. `gathered`
        (uint8) holds the all-gathered records of the earlier rounds (None for round 0). For
        repeated rounds, shard_call() builds the arguments once."""
        return self.shard_call(logits, rank=rank, world_size=world_size,
                               vocab_offset=vocab_offset, max_top_k=max_top_k,
                               **sample_kwargs).partial(gathered, record_out, round)

    def sample_finish(self, logits: ArrayLike, gathered: ArrayLike, *, rank: int = 0,
                      world_size: int = 1, vocab_offset: int = 0, max_top_k: int = 64,
                      **sample_kwargs: Any) -> SampleResult:
        """dds_sample_finish: after the last round's all-gather, the outputs of every row
        (identical on every rank; probs: this rank's slice) from `gathered` (uint8,
        plan.gathered_bytes)."""
        return self.shard_call(logits, rank=rank, world_size=world_size,
                               vocab_offset=vocab_offset, max_top_k=max_top_k,
                               **sample_kwargs).finish(gathered)

    # -- stash ----------------------------------------------------------------------------------
    @traceable("stash_logprobs")
    def stash_logprobs(self, logits: ArrayLike, *,
                       row_offsets: Optional[ArrayLike] = None,
                       keep: Optional[ArrayLike] = None,
                       slots: Optional[ArrayLike] = None,
                       num_valid: Optional[ArrayLike] = None,
                       temperature: Union[Scalar, ArrayLike] = 1.0,
                       committed_tokens: Optional[ArrayLike] = None,
                       token_ids: Optional[ArrayLike] = None,
                       num_token_ids: Optional[ArrayLike] = None,
                       num_top: Optional[int] = None,
                       logits_mode: Union[str, int] = "logprobs",
                       num_slots: Optional[int] = None,
                       rows_per_slot: Optional[int] = None,
                       outputs: Iterable[str] = ("token_ids", "logprobs", "ranks"),
                       dtype: Any = None,
                       out_token_ids: Optional[ArrayLike] = None,
                       out_logprobs: Optional[ArrayLike] = None,
                       out_ranks: Optional[ArrayLike] = None,
                       out_request_status: Optional[ArrayLike] = None,
                       stream: Any = None,
                       allowed_token_masks: Optional[ArrayLike] = None) -> StashResult:
        """Top log-probabilities of converged requests, written per slot (dds_stash_logprobs).

        Outputs are [num_slots, rows_per_slot, num_top + 1]. num_top defaults to token_ids'
        width (token_ids given as [num_requests, num_top]) or min(20, max_stash_width);
        num_slots to num_requests; rows_per_slot to the largest request (needs host
        row_offsets) — or both from the shape of a given out_* array. Outputs allocated here
        are filled with the padding values (token 0, -inf, rank 0) first, so entries dds does
        not write (requests not kept, rows beyond num_valid) read as padding.

        Parameters
        ----------
        logits : array [num_rows, vocab_size]
            float32 / bfloat16 / float16, as in sample().
        row_offsets : array of num_requests + 1 int32, optional
            Rows of each request (None: one row per request).
        keep, slots, num_valid : arrays of num_requests, optional
            Which requests are stashed (uint8 / bool), their slot, and their valid rows.
        temperature : scalar or array
            Per-request temperature of the log-probs.
        committed_tokens : array of num_rows int32, optional
            Entry 0 of each row (None: the argmax).
        token_ids, num_token_ids : arrays, optional
            Each request's own tokens [num_requests, num_top] instead of its top-num_top.
        num_top, num_slots, rows_per_slot : int, optional
            The output geometry (defaults above).
        logits_mode : {"logprobs", "logits"}
            Log-probabilities or tempered logits.
        outputs : iterable of str
            Outputs to allocate: token_ids, logprobs, ranks, request_status.
        dtype : str, optional
            The logits' dtype for raw 16-bit words.
        out_token_ids, out_logprobs, out_ranks, out_request_status : array, optional
            Written in place instead of allocated.
        stream : optional
            CUDA stream as in sample().
        allowed_token_masks : int32 array [num_requests, words] or [words], optional
            As in sample(): a disallowed token is -inf like a -inf logit (never in the top-n;
            value -inf where it is entry 0 or one of the request's ids).

        Returns
        -------
        StashResult
        """
        h = self._live()
        linfo = describe(logits, "logits")
        if linfo is None:
            raise TypeError(f"logits: expected a 2-D array (numpy on the cpu backend, torch / "
                            f"CuPy on cuda), got {type(logits).__name__}")
        ctx = self._context(linfo, stream)
        linfo, ldt, row_stride = matrix(logits, "logits", ctx, self.vocab_size, _LOGIT_DTYPES,
                                        dtype, info=linfo)
        num_rows = linfo.shape[0]
        ptr, R, host_offsets = self._rows_and_requests("logits", num_rows, row_offsets, ctx)
        a = _dds.dds_stash_args()
        a.num_rows = num_rows
        a.logits = linfo.ptr
        a.dtype = DTYPE_CODES[ldt]
        a.row_stride = row_stride
        a.row_offsets = ptr
        a.num_requests = max(R, 1)

        # token_ids first: it fixes num_top.
        tinfo = None
        if token_ids is not None:
            if is_host_sequence(token_ids) or (describe(token_ids, "token_ids") or
                                               _NoInfo).on_host:
                tid = host_convert(token_ids, "token_ids", "int32")
                if tid.ndim == 1 and num_top is not None and num_top > 0:
                    tid = tid.reshape(-1, num_top) if tid.size == R * num_top else tid
                if tid.ndim != 2 or tid.shape[0] != R:
                    raise ValueError(f"token_ids: expected shape [num_requests={R}, num_top], "
                                     f"got {tid.shape}")
                width = tid.shape[1]
                tid_src: Any = tid
            else:
                tinfo = describe(token_ids, "token_ids")
                assert tinfo is not None
                if len(tinfo.shape) != 2 or tinfo.shape[0] != R:
                    raise ValueError(f"token_ids: expected shape [num_requests={R}, num_top], "
                                     f"got {tinfo.shape}")
                width = tinfo.shape[1]
                tid_src = token_ids
            if num_top is None:
                num_top = width
            elif num_top != width:
                raise ValueError(f"token_ids: has {width} columns but num_top is {num_top}")
        if num_top is None:
            num_top = min(20, self.max_stash_width)
        num_top = _check_int(num_top, "num_top", 0, self.max_stash_width)
        a.num_top = num_top
        if token_ids is not None:
            if tinfo is None:
                flat = np.ascontiguousarray(tid_src).reshape(-1)
                a.token_ids = vector(flat, "token_ids", ctx, "int32", R * num_top)[0]
            else:
                check_ctx = out_block(token_ids, "token_ids", ctx, "int32", R * num_top)
                a.token_ids = check_ctx.ptr
        if num_token_ids is not None:
            if token_ids is None:
                raise ValueError("num_token_ids: given without token_ids")
            a.num_token_ids = vector(num_token_ids, "num_token_ids", ctx, "int32", R)[0]

        if allowed_token_masks is not None:
            a.allowed_token_masks, a.allowed_mask_stride = allowed_masks(
                allowed_token_masks, ctx, max(R, 1), self.vocab_size)
        if keep is not None:
            a.keep = vector(keep, "keep", ctx, "uint8", R, alt_dtypes=("bool",))[0]
        if slots is not None:
            a.slots = vector(slots, "slots", ctx, "int32", R)[0]
        if num_valid is not None:
            a.num_valid = vector(num_valid, "num_valid", ctx, "int32", R)[0]
        if committed_tokens is not None:
            a.committed_tokens = vector(committed_tokens, "committed_tokens", ctx, "int32",
                                        num_rows)[0]
        self._request_param(a, temperature, "temperature", "temperatures", "temperature",
                            "float32", ctx, R, _check_float, default=1.0)
        if isinstance(logits_mode, str):
            modes = {"logprobs": 0, "logits": 1}
            if logits_mode not in modes:
                raise ValueError(f"logits_mode: must be 'logprobs' or 'logits', got "
                                 f"{logits_mode!r}")
            a.logits_mode = modes[logits_mode]
        else:
            a.logits_mode = _check_int(logits_mode, "logits_mode", 0, 1)

        # -- output geometry --
        given = {"token_ids": out_token_ids, "logprobs": out_logprobs, "ranks": out_ranks}
        for key, arr in given.items():
            if arr is None:
                continue
            info = describe(arr, "out_" + key)
            if info is None:
                raise TypeError(f"out_{key}: expected an array, got {type(arr).__name__}")
            if len(info.shape) == 3:
                if info.shape[2] != num_top + 1:
                    raise ValueError(f"out_{key}: last dimension is {info.shape[2]}, expected "
                                     f"num_top + 1 = {num_top + 1}")
                if num_slots is None:
                    num_slots = info.shape[0]
                if rows_per_slot is None:
                    rows_per_slot = info.shape[1]
        if num_slots is None:
            num_slots = R
        if rows_per_slot is None:
            if row_offsets is None:
                rows_per_slot = 1
            elif host_offsets is not None:
                rows_per_slot = max(1, int(np.max(np.diff(host_offsets))))
            else:
                raise ValueError("rows_per_slot: required when row_offsets is a device array "
                                 "and no 3-D out_* array gives the geometry")
        a.num_slots = _check_int(num_slots, "num_slots", 1, 2 ** 31 - 1)
        a.rows_per_slot = _check_int(rows_per_slot, "rows_per_slot", 1, 2 ** 31 - 1)
        shape = (num_slots, rows_per_slot, num_top + 1)
        count = num_slots * rows_per_slot * (num_top + 1)

        if isinstance(outputs, str):
            outputs = (outputs,)
        wanted = set()
        for o in outputs:
            if o not in STASH_OUTPUTS:
                raise ValueError(f"outputs: unknown output {o!r}; choose from {STASH_OUTPUTS}")
            wanted.add(o)
        res = {}
        spec = {"token_ids": ("int32", 0), "logprobs": ("float32", float("-inf")),
                "ranks": ("int32", 0)}
        for key, (dt, pad) in spec.items():
            arr = given[key]
            if arr is not None:
                info = out_block(arr, "out_" + key, ctx, dt, count)
            elif key in wanted:
                arr = ctx.empty(shape, dt, fill=pad)
                info = describe(arr, key)  # type: ignore[assignment]
            else:
                continue
            res[key] = arr
            setattr(a, "out_" + key, info.ptr)  # type: ignore[union-attr]
        if out_request_status is not None or "request_status" in wanted:
            arr = out_request_status
            if arr is not None:
                out_vector(arr, "out_request_status", ctx, "int32", R)
            else:
                arr = ctx.empty((R,), "int32", fill=0)
            res["request_status"] = arr
            a.request_status = describe(arr, "request_status").ptr  # type: ignore[union-attr]
        if res.keys().isdisjoint(("token_ids", "logprobs", "ranks")):
            raise ValueError("outputs: name at least one of token_ids, logprobs, ranks (or pass "
                             "an out_* array)")

        with self._lock:
            if self._handle is None:
                raise _dds.Error("dds.Sampler: the sampler is closed")
            _dds.dds_stash_logprobs(h, a, ctx.stream)
        ctx.keep.clear()
        return StashResult(**res)


    # -- shared by reveal / verify ----------------------------------------------------------------
    @staticmethod
    def _wanted(outputs: Iterable[str], allowed: Sequence[str]) -> set:
        if isinstance(outputs, str):
            outputs = (outputs,)
        wanted = set()
        for o in outputs:
            if o not in allowed:
                raise ValueError(f"outputs: unknown output {o!r}; choose from {tuple(allowed)}")
            wanted.add(o)
        return wanted

    def _first_ctx(self, obj: Any, name: str, stream: Any) -> Tuple[CallContext, ArrayInfo]:
        info = None if is_host_sequence(obj) else describe(obj, name)
        if info is None:
            if self.backend == "cuda":
                raise TypeError(f"{name}: expected a CUDA array (torch / CuPy) on the cuda "
                                f"backend, got {type(obj).__name__}")
            obj = host_convert(obj, name, "float32")
            info = describe(obj, name)
            assert info is not None
        ctx = self._context(info, stream)
        check_device(info, name, ctx)
        return ctx, info

    def _out(self, key: str, given: Any, wanted: set, ctx: CallContext, dtype: str, shape: Tuple,
             res: dict, alt: Sequence[str] = (), fill: Any = None) -> Optional[int]:
        if given is not None:
            n = 1
            for d in shape:
                n *= d
            if len(shape) == 1:
                info = out_vector(given, "out_" + key, ctx, dtype, n, alt)
            else:
                info = out_block(given, "out_" + key, ctx, dtype, n)
            res[key] = given
            return info.ptr
        if key in wanted:
            arr = ctx.empty(shape, dtype, fill=fill)
            res[key] = arr
            return describe(arr, key).ptr  # type: ignore[union-attr]
        return None


SAMPLE_DEFAULTS: Dict[str, Any] = {
    p.name: p.default for p in inspect.signature(Sampler.sample).parameters.values()
    if p.kind is inspect.Parameter.KEYWORD_ONLY}


if ("logits",) + tuple(SAMPLE_DEFAULTS) != PLAN_SLOTS:  # pragma: no cover - a coding error
    raise ImportError("dds: _sample.PLAN_SLOTS differs from Sampler.sample's signature")


def sample_keywords(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """Sampler.sample's keywords: `kwargs` over the defaults; TypeError for an unknown one."""
    for k in kwargs:
        if k not in SAMPLE_DEFAULTS:
            raise TypeError(f"sample() got an unexpected keyword argument {k!r}")
    kw = dict(SAMPLE_DEFAULTS)
    kw.update(kwargs)
    return kw


class _NoInfoType:
    on_host = True


_NoInfo = _NoInfoType()


def _synchronize(device: int) -> None:
    """Waits for the device (before freeing a CUDA sampler's scratch space)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize(device)
                return
        except Exception:
            pass
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            cupy.cuda.Device(device).synchronize()
        except Exception:
            pass
