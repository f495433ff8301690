"""vLLM DiffusionGemma's sampler primitives, computed by dds.

vLLM (0.33) samples a DiffusionGemma denoising step with ``sample_row_stats`` (its Triton
kernel in ``vllm/model_executor/models/diffusion_gemma_sampler.py``) and stashes the logprobs of
a converged canvas with ``compute_topk_scores`` on the tempered logits
(``vllm/model_executor/models/diffusion_gemma.py``). This module gives both with the same
signatures, dtypes and semantics on torch tensors (CUDA tensors on dds' CUDA backend; CPU tensors
and numpy arrays on the CPU backend), each a ``dds_sample`` / ``dds_stash_logprobs`` call:

    from dds import vllm as ddsv
    argmax, sample, entropy, probs = ddsv.sample_row_stats(logits, temps, W, seed, torch.bfloat16)
    ddsv.stash_converged_logprobs(logits, W, src, slots, keep, valid, temps, num_topk,
                                  num_token_ids, token_ids, out_ids, out_logprobs, out_ranks,
                                  logits_mode)
    accept = ddsv.entropy_bound_accept(entropy.view(n, W), entropy_bound)   # the EB-sampler rule

How vLLM's semantics map onto dds:
- Temperature: vLLM divides by ``max(T, 1e-10)`` for the argmax-free statistics (entropy,
  probs) and adds Gumbel noise only where ``T > 0``. dds is given ``max(T, 1e-10)`` (so the
  entropy and probs of a ``T = 0`` row are those of ``logits / 1e-10``: log k and 1/k over k
  tied maxima), and the sample of a ``T <= 0`` row is replaced by the argmax afterwards (at
  ``1e-10`` dds would pick uniformly among exactly tied maxima; vLLM takes the lowest id).
- Randomness: vLLM draws one seed per call; dds keys its noise by (seed, step, position), so
  request r of the call uses step r: every row gets its own noise. Samples are equal to vLLM's in
  distribution, not token for token.
- Stash ranks: vLLM's rank of the selected (argmax) token counts the columns ``>=`` it, i.e. the
  number of columns tied at the maximum; dds' stash ranks count the strictly larger ones. A second
  stash pass at temperature 1e-20 (one entry per row) yields ``log p = -log k`` for the k tied
  maxima, hence vLLM's rank (exact while the tied maxima of a row are fewer than ~5000 and
  distinct values differ by more than 1e-18).
- Graph safety: no host synchronisation, no host-to-device copy. ``sample_row_stats``
  allocates only its returned outputs (the two int64 outputs share one buffer that also holds
  their int32 staging) and otherwise writes persistent buffers; ``stash_converged_logprobs``
  writes the caller's outputs through persistent scratch and allocates only a few temporaries
  of O(requests + slots) elements (index maps). Besides the dds calls each runs a few small
  elementwise kernels (row offsets, clamped temperatures, the greedy fix, int32 -> int64).
  The dds samplers and the buffers live in a cache per (array library, backend, device,
  vocabulary); a sampler is created, or replaced by a larger one, only outside CUDA graph
  capture: run each shape once eagerly (vLLM's warm-up does) before capturing.
- torch.compile: the three functions trace without a graph break (``fullgraph=True``): the
  dds calls become dds's custom operators, and the
  sampler a traced shape needs is looked up, or made, while tracing. dds registers those
  operators at ``import dds`` when torch is already imported, or when a ``dds.Sampler`` is
  first created: import torch first (a trace that finds them unregistered raises saying so).

Allowed token sets (constrained reads) and the entropy-bound reveal are dds primitives
(``allowed_token_masks=``, ``Sampler.reveal(policy="entropy_bound")``); where the loaded dds
lacks them, ``supports_allowed_token_masks()`` / ``supports_entropy_bound()`` say so and the
functions that need them raise ``NotImplementedError``.
"""

import inspect
import math
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _decode
from . import _sampler
from ._sampler import Sampler

__all__ = ["sample_row_stats", "stash_converged_logprobs", "entropy_bound_accept",
           "allowed_token_mask", "supports_allowed_token_masks", "supports_entropy_bound",
           "TEMPERATURE_FLOOR"]

TEMPERATURE_FLOOR = 1e-10
"""vLLM's temperature clamp: statistics of a row use max(T, 1e-10)."""

_RANK_TEMPERATURE = 1e-20  # ranks pass: softmax at 1/T = 1e20 is uniform over the tied maxima
_UNWRITTEN = -(2 ** 31)    # stash scratch fill: rows dds did not write keep it in entry 0


def supports_allowed_token_masks() -> bool:
    """Whether the loaded dds takes ``allowed_token_masks=`` in sample and stash_logprobs."""
    return all("allowed_token_masks" in inspect.signature(f).parameters
               for f in (Sampler.sample, Sampler.stash_logprobs))


def supports_entropy_bound() -> bool:
    """Whether the loaded dds has the reveal policy ``"entropy_bound"``."""
    return ("entropy_bound" in _decode.REVEAL_POLICIES and
            "entropy_bound" in inspect.signature(Sampler.reveal).parameters)


# -- array operations on torch tensors or numpy arrays (in place, into given buffers) -----------
class _TorchOps:
    def __init__(self, torch: Any, device: Any) -> None:
        self.t = torch
        self.device = device
        self.backend = "cuda" if device.type == "cuda" else "cpu"
        self.index = (device.index if device.index is not None else torch.cuda.current_device()
                      ) if self.backend == "cuda" else 0

    def capturing(self) -> bool:
        return self.backend == "cuda" and bool(self.t.cuda.is_current_stream_capturing())

    def compiling(self) -> bool:
        return bool(self.t.compiler.is_compiling())

    def empty(self, shape: Tuple[int, ...], dt: Any) -> Any:
        dt = getattr(self.t, dt) if isinstance(dt, str) else dt
        return self.t.empty(shape, dtype=dt, device=self.device)

    def full(self, shape: Tuple[int, ...], dt: str, value: Any) -> Any:
        return self.t.full(shape, value, dtype=getattr(self.t, dt), device=self.device)

    def iota(self, n: int) -> Any:
        return self.t.arange(n, dtype=self.t.int32, device=self.device)

    def as_int32(self, x: Any) -> Any:
        return x.view(self.t.int32)

    def where_(self, cond: Any, a: Any, b: Any, out: Any) -> None:
        self.t.where(cond, a, b, out=out)

    def merge(self, dst: Any, cond: Any, src: Any) -> None:
        """dst = src where cond (src's dtype may be narrower)."""
        self.t.where(cond, src, dst, out=dst)

    def copy(self, dst: Any, src: Any) -> None:
        dst.copy_(src)

    def logical_and(self, a: Any, b: Any, out: Any) -> None:
        self.t.logical_and(a, b, out=out)

    def masked_fill(self, x: Any, mask: Any, v: Any) -> None:
        x.masked_fill_(mask, v)

    def fill(self, x: Any, v: Any) -> None:
        x.fill_(v)

    def clamp(self, src: Any, lo: Any, hi: Any, out: Any) -> None:
        self.t.clamp(src, min=lo, max=hi, out=out)

    def gt(self, a: Any, v: Any, out: Any) -> None:
        self.t.gt(a, v, out=out)

    def ne(self, a: Any, v: Any, out: Any) -> None:
        self.t.ne(a, v, out=out)

    def mul(self, a: Any, v: int, out: Any) -> None:
        self.t.mul(a, v, out=out)

    def in_range(self, idx: Any, n: int, keep: Any) -> Any:
        """idx where keep and 0 <= idx < n, else n (the trash entry), as int64."""
        ok = (idx >= 0) & (idx < n)
        if keep is not None:
            ok &= keep.to(self.t.bool)
        return self.t.where(ok, idx.to(self.t.int64), n)

    def scatter(self, dst: Any, idx: Any, src: Any) -> None:
        dst.index_copy_(0, idx, src.to(dst.dtype))

    def index_fill(self, dst: Any, idx: Any, v: Any) -> None:
        dst.index_fill_(0, idx, v)

    def neg_exp_round(self, x: Any, hi: float) -> None:
        x.neg_().exp_().round_().clamp_(1.0, hi)


class _NumpyOps:
    backend = "cpu"
    index = 0

    def __init__(self) -> None:
        self.device = None

    def capturing(self) -> bool:
        return False

    def compiling(self) -> bool:
        return False

    def empty(self, shape: Tuple[int, ...], dt: Any) -> Any:
        return np.empty(shape, dtype=dt)

    def full(self, shape: Tuple[int, ...], dt: str, value: Any) -> Any:
        return np.full(shape, value, dtype=dt)

    def iota(self, n: int) -> Any:
        return np.arange(n, dtype=np.int32)

    def as_int32(self, x: Any) -> Any:
        return x.view(np.int32)

    def where_(self, cond: Any, a: Any, b: Any, out: Any) -> None:
        out[...] = np.where(cond, a, b)

    def merge(self, dst: Any, cond: Any, src: Any) -> None:
        np.copyto(dst, src, where=cond, casting="same_kind")

    def copy(self, dst: Any, src: Any) -> None:
        with np.errstate(invalid="ignore"):
            np.copyto(dst, src, casting="unsafe")

    def logical_and(self, a: Any, b: Any, out: Any) -> None:
        np.logical_and(a, b, out=out)

    def masked_fill(self, x: Any, mask: Any, v: Any) -> None:
        np.copyto(x, v, where=mask)

    def fill(self, x: Any, v: Any) -> None:
        x.fill(v)

    def clamp(self, src: Any, lo: Any, hi: Any, out: Any) -> None:
        out[...] = np.clip(np.asarray(src, np.float64), lo, hi)

    def gt(self, a: Any, v: Any, out: Any) -> None:
        np.greater(a, v, out=out)

    def ne(self, a: Any, v: Any, out: Any) -> None:
        np.not_equal(a, v, out=out)

    def mul(self, a: Any, v: int, out: Any) -> None:
        np.multiply(a, v, out=out)

    def in_range(self, idx: Any, n: int, keep: Any) -> Any:
        idx = np.asarray(idx).astype(np.int64)
        ok = (idx >= 0) & (idx < n)
        if keep is not None:
            ok &= np.asarray(keep).astype(bool)
        return np.where(ok, idx, n)

    def scatter(self, dst: Any, idx: Any, src: Any) -> None:
        dst[idx] = np.asarray(src).astype(dst.dtype)

    def index_fill(self, dst: Any, idx: Any, v: Any) -> None:
        dst[idx] = v

    def neg_exp_round(self, x: Any, hi: float) -> None:
        with np.errstate(over="ignore", invalid="ignore"):
            np.clip(np.round(np.exp(-x)), 1.0, hi, out=x)


def _ops(x: Any) -> Any:
    if type(x).__module__.split(".")[0] == "torch":
        import torch
        if _sampler._torch_compiling is None:  # dds's torch operators are not registered yet
            if torch.compiler.is_compiling():
                raise RuntimeError(
                    "dds.vllm under torch.compile: dds registers its torch operators at `import "
                    "dds` when torch is already imported, or when a dds.Sampler is created; "
                    "import torch before dds (or run the step once eagerly) before compiling")
            _sampler.enable_torch()
        return _TorchOps(torch, x.device)
    if isinstance(x, np.ndarray):
        return _NumpyOps()
    raise TypeError(f"logits: expected a torch tensor or a numpy array, got {type(x).__name__}")


# -- the sampler cache --------------------------------------------------------------------------
def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


class _Entry:
    """A dds sampler and the small persistent buffers of one (backend, device, vocabulary)."""

    def __init__(self, ops: Any, vocab: int, rows: int, requests: int, width: int) -> None:
        self.rows = max(4096, _pow2(rows))
        self.requests = max(64, _pow2(requests + 1))
        self.width = min(1024, max(20, width))
        self.sampler = Sampler(vocab, backend=ops.backend, device=ops.index,
                               max_rows=self.rows, max_requests=self.requests,
                               max_stash_width=self.width)
        n = self.requests + 1
        self.iota = ops.iota(n)                   # 0, 1, 2, ...: offsets / steps
        self.offsets = ops.iota(n)                # row offsets of the call
        self.temps = ops.full((n,), "float32", 1.0)
        self.noisy = ops.full((n,), "bool", False)  # T > 0 per request
        # stash: per tile request (index n of each = trash for requests not kept)
        self.keep = ops.full((n,), "uint8", 0)
        self.slots = ops.full((n,), "int32", 0)
        self.valid = ops.full((n,), "int32", 0)
        self.num_ids = ops.full((n,), "int32", 0)
        self.ids = ops.full((n * self.width,), "int32", 0)
        self.scratch: Dict[str, Any] = {}

    def fits(self, rows: int, requests: int, width: int) -> bool:
        return rows <= self.rows and requests < self.requests and width <= self.width

    def buffer(self, ops: Any, name: str, shape: Tuple[int, ...], dt: str) -> Any:
        """A persistent scratch array of at least `shape`, as a contiguous view of it."""
        n = 1
        for d in shape:
            n *= d
        b = self.scratch.get(name)
        if b is None or b.shape[0] < n:
            b = ops.empty((max(n, 1),), dt)
            self.scratch[name] = b
        return b[:n].reshape(shape)

    def row_offsets(self, ops: Any, n: int, cl: int, rows: int) -> Any:
        offs = self.offsets[:n + 1]
        ops.mul(self.iota[:n + 1], cl, out=offs)
        if n * cl > rows:
            ops.clamp(offs, 0, rows, out=offs)
        return offs


_entries: List[_Entry] = []  # every entry made (a captured CUDA graph may use a replaced one)
_cache: Dict[Tuple[str, str, int, int], int] = {}  # (array library, backend, device, V) -> index
_cache_lock = threading.Lock()


def _index(ops: Any, vocab: int, rows: int, requests: int, width: int) -> int:
    """The index in _entries of the entry for (ops' library, backend, device, vocab) that fits
    the call, made or grown here."""
    key = (type(ops).__name__, ops.backend, ops.index, vocab)
    with _cache_lock:
        i = _cache.get(key)
        if i is not None and _entries[i].fits(rows, requests, width):
            return i
        if ops.capturing():
            raise RuntimeError(
                f"dds.vllm: a call of {rows} rows, {requests} requests, stash width {width} "
                f"needs a new dds sampler, which cannot be created during CUDA graph capture; "
                f"run this shape once before capturing")
        if i is not None:
            e = _entries[i]
            rows, requests, width = (max(rows, e.rows), max(requests, e.requests - 1),
                                     max(width, e.width))
        _entries.append(_Entry(ops, vocab, rows, requests, width))
        _cache[key] = len(_entries) - 1
        setattr(_named, f"e{len(_entries) - 1}", _entries[-1])
        return _cache[key]


def _traced_index(backend: str, index: int, vocab: int, rows: int, requests: int,
                  width: int) -> int:
    """_index of a torch call while torch.compile traces it, run by the tracer itself
    (torch._dynamo.assume_constant_result, applied by dds._torch_ops.register): the graph holds
    the index as a constant."""
    import torch

    dev = torch.device(backend, index) if backend == "cuda" else torch.device("cpu")
    return _index(_TorchOps(torch, dev), vocab, rows, requests, width)


class _Named:
    """The entries again, as attributes e0, e1, ...: a trace reads entry i by name, which it
    finds even when _traced_index made it during the same trace (the trace keeps its first view
    of a list it has read, so _entries[i] would not be there)."""


_named = _Named()


def _entry(ops: Any, vocab: int, rows: int, requests: int, width: int = 0) -> _Entry:
    if ops.compiling():
        return getattr(_named, "e" + str(_traced_index(ops.backend, ops.index, vocab, rows,
                                                         requests, width)))
    return _entries[_index(ops, vocab, rows, requests, width)]


def _mask_kw(allowed_token_masks: Any) -> Dict[str, Any]:
    if allowed_token_masks is None:
        return {}
    if not supports_allowed_token_masks():
        raise NotImplementedError("allowed_token_masks: this build of dds has no allowed token "
                                  "sets (dds_sample_args.allowed_token_masks)")
    return {"allowed_token_masks": allowed_token_masks}


def _canvas(rows: int, canvas_len: Any, temps: Any, what: str) -> Tuple[int, int]:
    cl = int(canvas_len)
    if cl < 1:
        raise ValueError(f"canvas_len: must be >= 1, got {canvas_len}")
    n = -(-rows // cl)
    if len(temps.shape) != 1 or temps.shape[0] < n:
        raise ValueError(f"temps: expected [>= {n}] values ({rows} rows of canvas_len {cl}) "
                         f"{what}, got shape {tuple(temps.shape)}")
    return cl, n


# -- sample_row_stats ---------------------------------------------------------------------------
def sample_row_stats(logits: Any, temps: Any, canvas_len: int, seed: int, probs_dtype: Any, *,
                     allowed_token_masks: Any = None) -> Tuple[Any, Any, Any, Optional[Any]]:
    """Argmax, sample, entropy and (optionally) softmax per row: vLLM's ``sample_row_stats``.

    Parameters
    ----------
    logits : [rows, vocab] float32 / bfloat16 / float16 (torch tensor or numpy array)
        Row i belongs to request i // canvas_len. Any row stride.
    temps : [>= ceil(rows / canvas_len)] temperatures (float32 on the logits' device)
        Row i uses temps[i // canvas_len]. T <= 0 is greedy (sample = argmax, lowest id on
        ties); the entropy and probs use max(T, 1e-10), so a greedy row's entropy is that of
        logits / 1e-10 (log k over k tied maxima, else 0).
    canvas_len : int
    seed : int
        Key of the call's random numbers (0 .. 2**64 - 1); request r uses step r.
    probs_dtype : dtype or None
        dtype of the returned softmax (the model dtype), or None for no softmax.
    allowed_token_masks : [num_requests, words] int32, optional
        Per request packed bitmask of allowed tokens (bit t & 31 of word t >> 5); the other
        columns count as -inf. Needs a dds with allowed token sets.

    Returns
    -------
    (argmax int64 [rows], sample int64 [rows], entropy float32 [rows],
     probs [rows, vocab] probs_dtype or None); arrays of the logits' library and device.
    """
    ops = _ops(logits)
    if len(logits.shape) != 2:
        raise ValueError(f"logits: expected [rows, vocab], got shape {tuple(logits.shape)}")
    rows, vocab = int(logits.shape[0]), int(logits.shape[1])
    cl, n = _canvas(rows, canvas_len, temps, "for the rows' requests")
    mask_kw = _mask_kw(allowed_token_masks)
    rp = n * cl
    ints = ops.empty((3 * rp,), "int64")
    argmax, sample = ints[:rows], ints[rp:rp + rows]
    stage = ops.as_int32(ints)[4 * rp:]      # int32 [2 * rp]: dds writes here
    am32, tok32 = stage[:rp], stage[rp:]
    entropy = ops.empty((rows,), "float32")
    probs = ops.empty((rows, vocab), probs_dtype) if probs_dtype is not None else None
    if rows == 0:
        return argmax, sample, entropy, probs
    e = _entry(ops, vocab, rows, n)
    t = e.temps[:n]
    ops.clamp(temps[:n], TEMPERATURE_FLOOR, None, out=t)
    e.sampler.sample(logits, row_offsets=e.row_offsets(ops, n, cl, rows), temperature=t,
                     seed=seed, step=e.iota[:n], outputs=(), out_tokens=tok32[:rows],
                     out_argmax=am32[:rows], out_entropy=entropy, out_probs=probs, **mask_kw)
    noisy = e.noisy[:n]
    ops.gt(temps[:n], 0, out=noisy)
    tv = tok32.reshape(n, cl)
    ops.where_(noisy.reshape(n, 1), tv, am32.reshape(n, cl), out=tv)
    ops.copy(argmax, am32[:rows])
    ops.copy(sample, tok32[:rows])
    return argmax, sample, entropy, probs


# -- stash_converged_logprobs -------------------------------------------------------------------
def stash_converged_logprobs(logits: Any, canvas_len: int, src: Any, slots: Any, keep: Any,
                             valid: Any, temps: Any, num_topk: int, num_token_ids: Any,
                             token_ids: Any, out_ids: Any, out_logprobs: Any, out_ranks: Any,
                             logits_mode: bool, *, allowed_token_masks: Any = None) -> None:
    """Logprobs of converged canvases, written per slot: what vLLM's DiffusionGemma sampler
    stashes with ``compute_topk_scores`` when a request converges.

    Request j (of J) owns rows ``src[j] * canvas_len + p`` of ``logits`` for
    ``p < valid[j]``, divided by ``max(temps[j], 1e-10)`` (pass 1 for vLLM's read-only slots).
    Where ``keep[j]``, row p goes to ``out_*[slots[j], p]``: entry 0 is the argmax (lowest id on
    ties), entries 1.. the request's ``token_ids[j, :num_token_ids[j]]`` if it has any, else its
    ``num_topk`` largest (ties by lower id), then padding (token 0, -inf) up to the outputs'
    width; values are log-softmax of the tempered row (``logits_mode``: the tempered logits);
    ``out_ranks[slots[j], p]`` is vLLM's rank of the argmax, the number of columns >= it.
    Slots not kept, and rows p >= valid[j], are not written.

    Parameters
    ----------
    logits : [rows, vocab] float32 / bfloat16 / float16, the untempered logits
    canvas_len : int
    src, slots, valid : [J] integer arrays; keep : [J] bool / uint8; temps : [J] float
    num_topk : int (host)
    num_token_ids : [J] int or None; token_ids : [J, k] int (k <= width) or None
    out_ids : [S, W, 1 + width] int64 (or int32); out_logprobs : [S, W, 1 + width] float32;
    out_ranks : [S, W] int64 (or int32); W >= every valid[j]
    logits_mode : bool (host)
    allowed_token_masks : [rows // canvas_len, words] int32, optional
        Bitmask of each canvas' allowed tokens (as in sample_row_stats).
    """
    ops = _ops(logits)
    rows, vocab = int(logits.shape[0]), int(logits.shape[1])
    S, W, E = (int(d) for d in out_ids.shape)
    width = E - 1
    if tuple(out_logprobs.shape) != (S, W, E) or tuple(out_ranks.shape) != (S, W):
        raise ValueError(f"out_logprobs / out_ranks: expected shapes {(S, W, E)} / {(S, W)}, got "
                         f"{tuple(out_logprobs.shape)} / {tuple(out_ranks.shape)}")
    num_topk = int(num_topk)
    if not 0 <= num_topk <= width:
        raise ValueError(f"num_topk: must be in [0, {width}] (the outputs' width - 1), got "
                         f"{num_topk}")
    J = int(src.shape[0])
    for name, a in (("slots", slots), ("keep", keep), ("valid", valid), ("temps", temps)):
        if len(a.shape) != 1 or int(a.shape[0]) != J:
            raise ValueError(f"{name}: expected [J={J}] (one per src entry), got "
                             f"{tuple(a.shape)}")
    cl = int(canvas_len)
    if cl < 1:
        raise ValueError(f"canvas_len: must be >= 1, got {canvas_len}")
    n = -(-rows // cl)
    mask_kw = _mask_kw(allowed_token_masks)
    if rows == 0 or J == 0:
        return
    k_ids = 0
    if token_ids is not None:
        if num_token_ids is None:
            raise ValueError("num_token_ids: required with token_ids")
        if len(token_ids.shape) != 2 or int(token_ids.shape[0]) != J:
            raise ValueError(f"token_ids: expected [J={J}, k], got {tuple(token_ids.shape)}")
        k_ids = int(token_ids.shape[1])
        if k_ids > width:
            raise ValueError(f"token_ids: {k_ids} columns exceed the outputs' width {width}")
    e = _entry(ops, vocab, rows, max(n, J), width)

    # Request j -> tile request src[j] (requests not kept, or src out of range, go to the
    # trash entry n).
    idx = ops.in_range(src, n, keep)
    kt, st, vt, tt = e.keep[:n + 1], e.slots[:n + 1], e.valid[:n + 1], e.temps[:n + 1]
    ops.fill(kt, 0)
    ops.index_fill(kt, idx, 1)
    ops.scatter(st, idx, slots)
    ops.scatter(vt, idx, valid)
    tj = e.buffer(ops, "temps_j", (J,), "float32")
    ops.clamp(temps[:J], TEMPERATURE_FLOOR, None, out=tj)
    ops.scatter(tt, idx, tj)
    offs = e.row_offsets(ops, n, cl, rows)
    ids_kw: Dict[str, Any] = {}
    if token_ids is not None and width > 0:
        it = e.ids[:(n + 1) * width].reshape(n + 1, width)
        nt = e.num_ids[:n + 1]
        ops.fill(nt, 0)
        ops.scatter(nt, idx, num_token_ids)
        if k_ids:
            ops.scatter(it[:, :k_ids], idx, token_ids)
        ids_kw = {"token_ids": it[:n], "num_token_ids": nt[:n]}

    s_ids = e.buffer(ops, "ids", (S, W, E), "int32")
    s_lp = e.buffer(ops, "lp", (S, W, E), "float32")
    s_rk = e.buffer(ops, "rk", (S, W, 1), "float32")
    ops.fill(s_ids, _UNWRITTEN)
    common = dict(row_offsets=offs, keep=kt[:n], slots=st[:n], num_valid=vt[:n],
                  num_slots=S, rows_per_slot=W, outputs=(), **mask_kw)
    e.sampler.stash_logprobs(logits, temperature=tt[:n], num_top=width,
                             logits_mode="logits" if logits_mode else "logprobs",
                             out_token_ids=s_ids, out_logprobs=s_lp, **ids_kw, **common)
    # vLLM's rank: log p(argmax) at 1/T = 1e20 is -log(number of tied maxima).
    e.sampler.stash_logprobs(logits, temperature=_RANK_TEMPERATURE, num_top=0,
                             out_logprobs=s_rk, **common)

    written = e.buffer(ops, "written", (S, W), "bool")
    ops.ne(s_ids[:, :, 0], _UNWRITTEN, out=written)
    w3 = written.reshape(S, W, 1)
    if num_topk < width:
        # Requests without ids of their own list num_topk tokens, then padding (dds listed
        # `width`); requests with ids were padded by dds already.
        if ids_kw:
            sidx = ops.in_range(slots, S, keep)
            ns = e.buffer(ops, "ids_per_slot", (S + 1,), "int32")
            ops.fill(ns, 0)
            ops.scatter(ns, sidx, num_token_ids)
            topk_rows = e.buffer(ops, "topk_rows", (S, W), "bool")
            ops.logical_and(ns[:S].reshape(S, 1) == 0, written, out=topk_rows)
            pad = topk_rows.reshape(S, W, 1)
        else:
            pad = w3
        ops.masked_fill(s_ids[:, :, num_topk + 1:], pad, 0)
        ops.masked_fill(s_lp[:, :, num_topk + 1:], pad, float("-inf"))
    rk = s_rk.reshape(S, W)
    ops.neg_exp_round(rk, float(vocab))
    rk32 = e.buffer(ops, "rk32", (S, W), "int32")
    ops.copy(rk32, rk)
    ops.merge(out_ids, w3, s_ids)
    ops.merge(out_logprobs, w3, s_lp)
    ops.merge(out_ranks, written, rk32)


# -- the EB-sampler rule ------------------------------------------------------------------------
def entropy_bound_accept(entropy: Any, entropy_bound: Any, *, valid: Any = None,
                         out: Any = None) -> Any:
    """vLLM DiffusionGemma's entropy-bound acceptance (EB-sampler): per request (row of
    ``entropy`` [R, CL] float32), sort the positions by entropy, accept the longest prefix whose
    sum of entropies minus its largest stays <= ``entropy_bound`` (scalar or [R] float32; at
    least one position is accepted). ``valid`` ([R] int32): only positions p < valid[r] are
    eligible (vLLM ranks the padded positions too: leave it None to match). Equal entropies are
    taken in position order. Returns (or writes ``out``) a bool / uint8 [R, CL] mask, through
    ``Sampler.reveal(policy="entropy_bound")``.
    """
    if not supports_entropy_bound():
        raise NotImplementedError("entropy_bound_accept: this build of dds has no "
                                  "'entropy_bound' reveal policy (DDS_REVEAL_ENTROPY_BOUND)")
    ops = _ops(entropy)
    R, CL = int(entropy.shape[0]), int(entropy.shape[1])
    if out is None:
        out = ops.empty((R, CL), "bool")
    if R * CL == 0:
        return out
    e = _entry(ops, 1, R * CL, R)
    kw: Dict[str, Any] = {}
    if valid is not None:
        elig = e.buffer(ops, "eligible", (R, CL), "bool")
        pos = e.iota[:CL].reshape(1, CL)
        ops.gt(valid.reshape(R, 1), pos, out=elig)
        kw["eligible"] = elig.reshape(-1)
    e.sampler.reveal(entropy.reshape(-1), row_offsets=e.row_offsets(ops, R, CL, R * CL),
                     policy="entropy_bound", entropy_bound=entropy_bound,
                     out_reveal=out.reshape(-1), **kw)
    return out


# -- allowed token sets -------------------------------------------------------------------------
def allowed_token_mask(allowed: Sequence[Optional[Sequence[int]]], vocab_size: int) -> np.ndarray:
    """Packed bitmasks [len(allowed), ceil(vocab_size / 32)] int32 (xgrammar's layout: token t
    is bit t & 31 of word t >> 5) from each request's allowed ids (None: every token), for
    ``allowed_token_masks=``. Built on the host: copy it to the device once per request."""
    words = -(-int(vocab_size) // 32)
    m = np.zeros((len(allowed), words), np.uint32)
    for r, ids in enumerate(allowed):
        if ids is None:
            m[r] = 0xFFFFFFFF
            continue
        a = np.asarray(ids, np.int64).reshape(-1)
        if a.size and (a.min() < 0 or a.max() >= vocab_size):
            raise ValueError(f"allowed[{r}]: ids must be in [0, {vocab_size})")
        np.bitwise_or.at(m[r], a >> 5, (np.uint32(1) << (a & 31).astype(np.uint32)))
    return m.view(np.int32)
