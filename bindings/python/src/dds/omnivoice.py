"""An OmniVoice diffusion-sampler resource on dds: `OmniVoiceSampler.sample(request_ids, c_logits,
u_logits, seq_lens, iterations) -> (tokens, logprobs)`.

The contract is that of mstar's `DiffusionSamplerResource` for OmniVoice (audio codes, C = 8
codebooks x T frames, V = 1025 with the mask token as the forbidden class):

- `c_logits` / `u_logits` are `[rows, positions, vocab]`: `rows` = the C codebooks, every
  request's T frames concatenated along `positions` (`seq_lens[r]` frames for request r).
- Per request (set by `ingest_request`): guidance scale g, temperature T, top ratio (default
  0.1: the ceil(0.1 * V) most likely classes are kept) and seed; per call: the request's
  diffusion iteration.
- Scores: OmniVoice's classifier-free guidance `log_softmax((1 + g) log_softmax(c) - g
  log_softmax(u))` (plain `log_softmax(c)` where g = 0), the forbidden class set to -inf; with
  T > 0 the top-ratio classes are kept and a token drawn by Gumbel-max at temperature T, with
  T <= 0 the argmax. Returned: the tokens `[rows, positions]` (int64) and the guided
  log-probability of each token `[rows, positions]` (float32), what a confidence reveal ranks by.
  The confidence ranking, the layer penalty and the position temperature stay with the caller
  (`examples/python/omnivoice_loop.py` does them with `Sampler.reveal`).

One `dds_sample` call serves the whole batch, guided and unguided requests together: every
(codebook, request) pair is one dds request over the rows `[c, s_r, s_r + T_r)` of the
flattened `[rows * positions, vocab]` logits, with `positions` = the request's canvas cell
`c * T_r + t` (so a request's draws depend only on its seed, iteration and cells, never on the
batch), and `uncond_row_offsets = -1` for an unguided request: it needs no unconditional rows
(`u_logits` may carry positions for the guided requests only) and dds reads none.

Why dds's guidance gives OmniVoice's distribution. dds guides raw logits, `l = c + g (c - u)`
(docs/sampling.md §2). With `log_softmax(x) = x - LSE(x)` (LSE = log-sum-exp over the row),

    (1 + g) log_softmax(c) - g log_softmax(u) = (1 + g) c - g u - [(1 + g) LSE(c) - g LSE(u)]
                                              = c + g (c - u) - K,

where K = (1 + g) LSE(c) - g LSE(u) is one constant per row. log_softmax is invariant under a
per-row constant, so OmniVoice's guided log-probabilities are exactly `log_softmax(l)`: the same
distribution, the same order of classes (hence the same top-k set and argmax), and, since
`(x - K) / T = x / T - K / T`, the same softmax at every temperature. Gumbel-max on
`x / T` samples `softmax(x / T)` whatever constant x carries. So the dds call needs no
log_softmax of c or u at all; the two agree up to float32 rounding of the logits (a -inf in u
where c is finite makes OmniVoice's form NaN; dds takes the column as -inf).
`tests/test_omnivoice.py` checks the identity in float64 and dds's samples against the
float64 OmniVoice form by chi-square.

The returned log-probability. dds's guided statistics (`stats="guided"`) give `l_tok -
LSE'(l)`, normalised over the classes other than the forbidden one; OmniVoice normalises first
and forbids after, over all V classes: `l_tok - LSE(l)`. With `LSE(l) = LSE'(l) + log1p(exp(l_m
- LSE'(l)))` (m the forbidden class) and `LSE'(l) = l_tok - logprob_dds`, the adapter turns one
into the other from two gathered columns (the token's and the forbidden class's logits): no
extra pass over the vocabulary.

Arrays: numpy on the CPU backend, torch tensors (host or CUDA) on the matching backend. The
per-call arrays of a request batch (row offsets, canvas positions, uncond row offsets and the
per-request knobs, and the per-cell guidance scale, uncond row and column pairs the
log-probability fix-up gathers with) are built once, in the logits' library and on their
device, and reused while the request ids, their knobs (ingest_request / remove_request of a
member drops them), `seq_lens` and the logits' shapes stay the same, as over the steps of a
decode loop. Such a step does no host synchronisation and copies nothing to the device:
equal `iterations` go as one scalar; iterations that differ between requests live in a cached
step array, shifted on the device when every request moved by the same amount (a copy from the
host only when they move unevenly; a tensor of iterations is read on its device). dds runs the
call from a plan (`Sampler.sample`'s fast path); on torch the fix-up is a fixed handful of ops
on [cells, 2] (`tests/test_omnivoice_steps.py` counts them). This adapter is not meant to be
captured in a CUDA graph.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._sampler import Sampler


@dataclass
class RequestConfig:
    """Per-request knobs (mstar's DiffusionSamplingReqConfig)."""

    guidance_scale: float = 0.0
    temperature: float = 0.0
    top_ratio: float = 0.1
    seed: int = 0


_DEFAULT = RequestConfig()


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


class _Batch:
    """The per-call arrays of one request batch (OmniVoiceSampler._build_batch)."""

    def __init__(self, key: Tuple, like: Any, guided: bool, Pu: int, request_ids: Any) -> None:
        self.key, self.guided, self.Pu = key, guided, Pu
        self.rids = set(request_ids)
        self.torch = _is_torch(like)
        self.device = like.device if self.torch else None
        self.row_offsets = self.positions = self.temperature = self.top_k = self.seed = None
        self.uncond_row_offsets = self.guidance_scale = None
        # the log-probability fix-up's per-cell arrays (_build_batch)
        self.g_row = self.urow = self.rows = self.cell_guided = None
        self.col_idx = self.tok_col = None
        # the step array when iterations differ between requests, and the iterations it holds
        self.steps: Any = None
        self.steps_i32: Any = None  # the same memory as int32 (torch)
        self.steps_host: Optional[np.ndarray] = None

    def convert(self, host: np.ndarray) -> Any:
        """A host array as the logits' library holds it on their device (dds takes device
        int64 / int32 for uint64 seeds / uint32 steps bit for bit; host ones need the unsigned
        dtype to be read in place)."""
        if not self.torch:
            return host
        import torch

        host = np.ascontiguousarray(host)
        if self.device.type == "cpu":
            try:
                return torch.from_numpy(host)
            except TypeError:  # torch before 2.3: no uint64 / uint32 (dds converts per call)
                pass
        if host.dtype == np.uint64:
            host = host.view(np.int64)
        elif host.dtype == np.uint32:
            host = host.view(np.int32)
        return torch.from_numpy(host).to(self.device)

    def step(self, iterations: Any, R: int, C: int) -> Any:
        """dds's `step` for the requests' iterations: one Python int when they are equal;
        otherwise the batch's array of C x R steps, shifted on its device when every
        iteration moved by the same amount since the last call (a decode loop's steps), copied
        from the host only when they moved unevenly."""
        if iterations is None:
            return 0
        if _is_torch(iterations):
            if self.torch and self.device.type != "cpu" and iterations.device == self.device:
                # a device tensor: used there as it is (no host look, so no range check)
                if tuple(iterations.shape) != (R,):
                    raise ValueError(f"iterations: {tuple(iterations.shape)} values for {R} "
                                     f"request ids")
                return iterations.to(torch_int32()).repeat(C)
            iterations = iterations.cpu().numpy()  # a host tensor (or another device: syncs)
        it = np.asarray(iterations, np.int64)
        if it.shape != (R,):
            raise ValueError(f"iterations: {it.size} values for {R} request ids")
        if not R:
            return 0
        lo, hi = int(it.min()), int(it.max())
        if lo < 0 or hi >= 2 ** 32:
            raise ValueError(f"iterations: must be in [0, 2^32), got {lo if lo < 0 else hi}")
        if lo == hi:
            return lo  # one Python int: no array, the plan's scalar
        last = self.steps_host
        if last is not None and self.torch:
            d = it - last
            if d.min() == d.max():
                if d[0]:
                    self.steps_i32.add_(int(d[0]))  # int32 wraps as dds's uint32 does
                self.steps_host = it
                return self.steps
        self.steps = self.convert(np.tile(it.astype(np.uint32), C))
        if self.torch:  # (a host torch tensor is uint32, which has no add)
            self.steps_i32 = self.steps.view(torch_int32())
        self.steps_host = it
        return self.steps


def torch_int32() -> Any:
    import torch

    return torch.int32


class OmniVoiceSampler:
    """mstar's DiffusionSamplerResource contract for OmniVoice, on one dds.Sampler.

    Parameters
    ----------
    vocab_size : int
        Classes per cell (OmniVoice: 1025, the last one the mask token).
    num_rows : int
        Rows of the logits (OmniVoice: 8 codebooks).
    forbidden_class : int or None
        The class never drawn (the mask token), or None.
    backend, device : str, int
        The dds backend ("cpu" for numpy / CPU tensors, "cuda" for CUDA tensors) and device.
    max_positions, max_requests : int
        Capacities: positions (sum of seq_lens) and requests of one call.
    """

    def __init__(self, vocab_size: int = 1025, num_rows: int = 8,
                 forbidden_class: Optional[int] = 1024, *, backend: str = "cpu", device: int = 0,
                 max_positions: int = 4096, max_requests: int = 64) -> None:
        if num_rows < 1:
            raise ValueError(f"num_rows: must be >= 1, got {num_rows}")
        if forbidden_class is not None and not 0 <= forbidden_class < vocab_size:
            raise ValueError(f"forbidden_class: {forbidden_class} is outside [0, {vocab_size})")
        self.vocab_size = vocab_size
        self.num_rows = num_rows
        self.forbidden_class = forbidden_class
        self.sampler = Sampler(vocab_size, backend=backend, device=device,
                               max_rows=num_rows * max_positions,
                               max_requests=num_rows * max_requests)
        self._configs: Dict[Any, RequestConfig] = {}
        self._batch: Optional[_Batch] = None  # the last call's per-batch arrays

    def close(self) -> None:
        self.sampler.close()

    def __enter__(self) -> "OmniVoiceSampler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- request lifecycle ----------------------------------------------------------------------
    def ingest_request(self, rid: Any, config: Optional[RequestConfig] = None,
                       **knobs: Any) -> None:
        """Register request `rid` with its knobs (a RequestConfig, or its fields as keywords)."""
        cfg = dataclasses.replace(config) if config is not None else RequestConfig(**knobs)
        if not math.isfinite(cfg.guidance_scale):
            raise ValueError(f"guidance_scale: must be finite, got {cfg.guidance_scale}")
        if not 0.0 < cfg.top_ratio <= 1.0:
            raise ValueError(f"top_ratio: must be in (0, 1], got {cfg.top_ratio}")
        self._configs[rid] = cfg
        self._forget(rid)

    def remove_request(self, rid: Any) -> None:
        self._configs.pop(rid, None)
        self._forget(rid)

    def _forget(self, rid: Any) -> None:
        """Drops the cached batch arrays when they hold request `rid`'s knobs."""
        if self._batch is not None and rid in self._batch.rids:
            self._batch = None

    # -- sampling -------------------------------------------------------------------------------
    def sample(self, request_ids: Sequence[Any], c_logits: Any, u_logits: Any = None,
               seq_lens: Optional[Sequence[int]] = None,
               iterations: Optional[Sequence[int]] = None) -> Tuple[Any, Any]:
        """Draw a token for every (row, position) cell; return `(tokens, logprobs)`.

        Parameters
        ----------
        request_ids : sequence
            One id per request, in packed order.
        c_logits : array [rows, positions, vocab]
            Conditional logits; request r owns positions [s_r, s_r + seq_lens[r]).
        u_logits : array or None
            Unconditional logits: `[rows, positions, vocab]` like c_logits (the positions of
            unguided requests are not read), or `[rows, guided positions, vocab]` holding only
            the guided requests' positions, in packed order. None when no request is guided.
        seq_lens : sequence of int, optional
            Positions per request (None: one request owning every position).
        iterations : sequence of int, optional
            Each request's diffusion step (the dds `step`; None: zeros).

        Returns
        -------
        tokens : [rows, positions] int64
        logprobs : [rows, positions] float32, OmniVoice's guided log-probability of the token.
        """
        if len(getattr(c_logits, "shape", ())) != 3:
            raise ValueError(f"c_logits: expected [rows, positions, vocab], got shape "
                             f"{tuple(getattr(c_logits, 'shape', ()))}")
        C, P, V = (int(d) for d in c_logits.shape)
        if C != self.num_rows or V != self.vocab_size:
            raise ValueError(f"c_logits: shape {(C, P, V)}, but the sampler was made for "
                             f"{self.num_rows} rows and a vocabulary of {self.vocab_size}")
        R = len(request_ids)
        if seq_lens is not None and hasattr(seq_lens, "tolist"):
            seq_lens = seq_lens.tolist()  # numpy / torch: a host list (a device tensor syncs)
        key = (tuple(request_ids), None if seq_lens is None else tuple(seq_lens), P,
               None if u_logits is None else tuple(u_logits.shape), type(c_logits),
               getattr(c_logits, "device", None))
        b = self._batch
        if b is None or b.key != key:
            cfgs = [self._configs.get(rid, _DEFAULT) for rid in request_ids]
            b = self._batch = self._build_batch(key, request_ids, cfgs, c_logits, u_logits,
                                                seq_lens, C, P, V)
        step = b.step(iterations, R, C)
        flat = c_logits.reshape(C * P, V)
        u2 = None
        kw: Dict[str, Any] = {}
        if b.guided:
            u2 = u_logits.reshape(C * b.Pu, V)
            kw = dict(uncond_logits=u2, uncond_row_offsets=b.uncond_row_offsets,
                      guidance_scale=b.guidance_scale)
        res = self.sampler.sample(
            flat, row_offsets=b.row_offsets, positions=b.positions, temperature=b.temperature,
            top_k=b.top_k, seed=b.seed, step=step,
            banned_token=-1 if self.forbidden_class is None else self.forbidden_class,
            stats="guided", outputs=("tokens", "logprobs"), **kw)
        tokens, logprobs = res.tokens, res.logprobs
        if b.torch:
            if self.forbidden_class is not None and P:
                logprobs = _renormalise_torch(flat, u2, tokens, logprobs, b)
            return tokens.long().view(C, P), logprobs.view(C, P)
        if self.forbidden_class is not None and P:
            logprobs = self._renormalise(flat, u2, tokens, logprobs, b)
        return tokens.astype(np.int64).reshape(C, P), logprobs.reshape(C, P)

    def _build_batch(self, key: Tuple, request_ids: Sequence[Any], cfgs: List[RequestConfig],
                     c_logits: Any, u_logits: Any, seq_lens: Optional[Sequence[int]], C: int,
                     P: int, V: int) -> "_Batch":
        """The validated per-call arrays of one request batch, in the logits' library and on
        their device (one copy each), reused while request ids, knobs, lengths and shapes stay
        the same (a decode loop's steps)."""
        R = len(request_ids)
        lens = np.asarray([P] if seq_lens is None else list(seq_lens), np.int64)
        if lens.size != R:
            raise ValueError(f"seq_lens: {lens.size} lengths for {R} request ids")
        if np.any(lens < 0) or int(lens.sum()) != P:
            raise ValueError(f"seq_lens: must be >= 0 and sum to the {P} positions of c_logits, "
                             f"got {lens.tolist()}")
        g = np.array([c.guidance_scale for c in cfgs], np.float64)
        guided = g != 0
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)

        # unconditional rows of the guided requests
        u_starts = np.full(R, -1, np.int64)
        Pu = 0
        if guided.any():
            if u_logits is None:
                bad = [rid for rid, gd in zip(request_ids, guided) if gd][0]
                raise ValueError(f"u_logits: required, request {bad!r} has a guidance scale")
            if len(u_logits.shape) != 3 or int(u_logits.shape[0]) != C or \
                    int(u_logits.shape[2]) != V:
                raise ValueError(f"u_logits: expected [{C}, positions, {V}], got "
                                 f"{tuple(u_logits.shape)}")
            Pu = int(u_logits.shape[1])
            compact = np.concatenate([[0], np.cumsum(np.where(guided, lens, 0))[:-1]])
            if Pu == P:
                u_starts = np.where(guided, starts, -1)
            elif Pu == int(lens[guided].sum()):
                u_starts = np.where(guided, compact, -1)
            else:
                raise ValueError(f"u_logits: {Pu} positions; expected {P} (every request's) or "
                                 f"{int(lens[guided].sum())} (the guided requests')")

        # one dds request per (codebook, request), codebook-major over the flattened rows
        row_offsets = np.empty(C * R + 1, np.int64)
        row_offsets[:-1] = (np.arange(C)[:, None] * P + starts[None, :]).reshape(-1)
        row_offsets[-1] = C * P
        seg = np.repeat(np.arange(R), lens)  # request of each position
        t = np.arange(P) - starts[seg]
        positions = (np.arange(C)[:, None] * lens[seg][None, :] + t[None, :]).reshape(-1)
        if positions.size and positions.max() >= 2 ** 31:
            raise ValueError("seq_lens: a request's canvas exceeds 2^31 cells")
        if C * max(P, Pu) >= 2 ** 31:
            raise ValueError("c_logits: more than 2^31 rows")
        uoffs = np.where(guided[None, :], np.arange(C)[:, None] * Pu + u_starts[None, :], -1)
        temps = [max(float(c.temperature), 0.0) for c in cfgs]
        top_k = [max(1, math.ceil(c.top_ratio * V)) for c in cfgs]
        seeds = np.array([c.seed for c in cfgs], np.uint64)

        b = _Batch(key, c_logits, bool(guided.any()), Pu, request_ids)
        b.row_offsets = b.convert(row_offsets.astype(np.int32))
        b.positions = b.convert(positions.astype(np.int32))
        b.temperature = b.convert(np.tile(np.float32(temps), C))
        b.top_k = b.convert(np.tile(np.int32(top_k), C))
        b.seed = b.convert(np.tile(seeds, C))
        if b.guided:
            b.uncond_row_offsets = b.convert(uoffs.reshape(-1).astype(np.int32))
            b.guidance_scale = b.convert(np.tile(g.astype(np.float32), C))
        m = self.forbidden_class
        if m is not None and P:
            # the fix-up's per-cell arrays: guidance scale, whether guided, uncond row (0 where
            # unguided: such a cell reads its conditional logits twice)
            rows = np.arange(C * P)
            u_shift = u_starts - np.where(guided, starts, 0)
            cell_guided = np.tile(guided[seg], C)
            g_row = np.tile(g[seg], C)
            urow = np.where(cell_guided, (rows // P) * Pu + rows % P + np.tile(u_shift[seg], C),
                            0)
            if not b.torch:
                b.g_row, b.urow, b.rows, b.cell_guided = g_row, urow, rows, cell_guided
                return b
            # torch: the columns (token, forbidden class) of every cell, the token's written per
            # step into this cached index array (_renormalise_torch)
            b.g_row = b.convert(g_row.astype(np.float32)[:, None])
            b.col_idx = b.convert(np.stack([rows * 0, np.full(C * P, m)], 1))
            b.tok_col = b.col_idx[:, 0]
            if b.guided:
                b.urow = b.convert(urow[:, None])
                b.cell_guided = None if cell_guided.all() else b.convert(cell_guided[:, None])
        return b

    def _renormalise(self, flat: Any, u2: Any, tokens: Any, lp: Any, b: "_Batch") -> Any:
        """dds's log-prob (normalised without the forbidden class) -> OmniVoice's (with it),
        numpy, in float64."""
        m = self.forbidden_class
        g_row, urow, rows = b.g_row, b.urow, b.rows
        tok = np.asarray(tokens, np.int64)
        c_tok = flat[rows, tok].astype(np.float64)
        c_m = flat[:, m].astype(np.float64)
        if b.guided:
            gd = b.cell_guided
            u_tok = np.where(gd, u2[urow, tok].astype(np.float64), c_tok)
            u_m = np.where(gd, u2[urow, m].astype(np.float64), c_m)
        else:
            u_tok, u_m = c_tok, c_m
        with np.errstate(invalid="ignore", over="ignore"):
            l_tok = c_tok + g_row * (c_tok - u_tok)
            l_m = np.where(np.isneginf(c_m) | np.isneginf(u_m), -np.inf, c_m + g_row * (c_m - u_m))
            corr = np.log1p(np.exp(l_m - (l_tok - lp.astype(np.float64))))
            out = np.where(np.isfinite(lp), lp - corr, lp)
        return out.astype(np.float32)


def _renormalise_torch(flat: Any, u2: Any, tokens: Any, lp: Any, b: _Batch) -> Any:
    """_renormalise on torch tensors, in float32 on their device, in a fixed handful of ops: one
    gather of the (token, forbidden class) logit pair of every cell from c (one from u), the
    guidance and the -inf rule on [cells, 2], the log1p(exp) correction."""
    import torch

    b.tok_col.copy_(tokens)  # the cells' columns: (token, forbidden class)
    cv = flat.gather(1, b.col_idx).float()
    if b.guided:
        uv = u2[b.urow, b.col_idx].float()
        if b.cell_guided is not None:  # unguided cells: u = c, whatever u's rows hold
            uv = torch.where(b.cell_guided, uv, cv)
        # l = c + g (c - u); a class -inf in c or u gives -inf, nan or +inf here: all -> -inf
        lv = torch.nan_to_num(torch.addcmul(cv, b.g_row, cv - uv), nan=-math.inf,
                              posinf=-math.inf)
    else:
        lv = cv
    l_tok, l_m = lv.unbind(1)
    # lp - log1p(exp(l_m - LSE'(l))); nan only where l_tok and lp are both -inf (lp stays)
    corr = torch.nn.functional.softplus(l_m - (l_tok - lp))
    return lp - torch.nan_to_num(corr, nan=0.0, posinf=math.inf)


__all__: List[str] = ["OmniVoiceSampler", "RequestConfig"]
