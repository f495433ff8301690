"""`dds.generate`: a Fugue-style masked-diffusion generate loop over a caller's model, on
`Sampler.sample`, `Sampler.reveal` and `Sampler.verify_drafts`.

The continuation (`gen_length` positions after the prompt) starts as mask tokens and is revealed
one block at a time (`block_length` positions, or the whole continuation); every call runs the
caller's `model(tokens [N, L] int64) -> logits [N, L, V]` on whole canvases. Orders:

- `order="random"`, `steps_per_block=s`: each call samples every eligible position of the block
  and reveals an even share, `ceil(m / steps left)`, at uniformly random positions (dds_reveal
  policy "random"). `s = block_length` reveals one token per call: the exact random-order
  process, MDLM's ancestral sampler with one token per step.
- `order="random"`, `draft_tokens=n`: exact self-speculative decoding of that one-token-per-call
  process (below): up to n + 1 tokens per call, the same joint distribution.
- `order="confidence"`: each call samples the block and reveals every position whose sampled
  token's probability (processed: after temperature and filters) is `>= threshold`, at least
  the most confident one; without a threshold, the most confident even share.
Sampling: temperature, top-k, top-p per dds (docs/sampling.md), the mask token banned. EOS:
positions after the first EOS of the continuation are not eligible (an accepted EOS cuts the
order); a request is done when it has an EOS and no mask before it, or no mask at all; the
returned canvas holds `eos_token` after its first EOS.

Self-speculative decoding, and why it is exact. Let sigma be a uniformly random order of the
positions (block by block: a random permutation of each block, the blocks in sequence). The
target process reveals, one call at a time, the next eligible position of sigma (eligible:
masked and before the first EOS), drawing its token from the model's distribution at that
position given the current canvas. Since sigma is uniform and independent of the tokens, the
position it reveals is uniform among the eligible ones of the current block given everything
so far (a uniform permutation restricted to any subset, conditioned on its visited prefix, is
uniform on the rest), which is the one-token-per-call random-order process.
A call with n drafts: the canvas x, the next eligible positions pi_0, pi_1, ... of sigma and
draft tokens d_i at pi_i. Copy i of the canvas holds d_0 .. d_{i-1} at pi_0 .. pi_{i-1} (copy 0
is x); the call scores the n + 1 copies at once, and target row p_i is copy i's distribution at
pi_i: exactly the target process's distribution for the (i+1)-th token of this call *given that
the first i tokens were d_0 .. d_{i-1}*. Verification (dds_verify_drafts) walks i = 0, 1, ...:
accept d_i with probability min(1, p_i(d_i) / q_i(d_i)); at the first rejection, draw from the
residual max(p_i - q_i, 0) (normalised) and end the call; with every draft accepted, draw a bonus
token from p_n. Leviathan et al.'s argument gives, at every i, conditional on the history
(x, sigma, and the accepted d_<i), a token distributed exactly as p_i: P(t) = min(p, q)(t) +
(1 - sum min(p, q)) * max(p - q, 0)(t) / sum max(p - q, 0) = p(t). This needs only that d_i is
drawn from q_i with randomness independent of the verification and that q_i is known; q_i may
depend on anything already fixed. Where the drafts come from: the previous call. After
committing a tokens (copy a held the a accepted drafts, the new canvas is copy a's plus the
corrected / bonus token), the next positions of sigma are drafted by `Sampler.sample` from copy
a's rows at those positions (the most informed rows the call produced; copy 0's rows would also
be exact, with fewer accepted drafts). The first call of a run has no drafts: it samples one
token from p_0. The draft noise (dds salts BLOCK / TOKEN, step = the call) is independent of the
verification noise (salts VERIFY / VBL1 / VTK1, step = the next call).
EOS with drafts: the positions pi_i depend on the drafts, since a draft EOS at pi_i makes the
later candidates after pi_i ineligible in copies i + 1 ... The loop samples drafts at the next
n + 1 eligible positions of sigma given x (independently: dds draws each position with its own
noise), then walks them: a draft EOS at pi_i removes the later candidates placed after pi_i,
and the survivors, in sigma's order, are a prefix of the true pi sequence given the drafts (whether
pi_i exists, and where, depends only on d_0 .. d_{i-1}; d_i itself stays a draw from q_i). With m
survivors the call verifies min(n, m) drafts: every draft whose position exists, whatever its
value. (Dropping a draft because of its own value, e.g. an EOS draft that leaves no position after
it, would condition it and bias the result: the tests caught exactly that.) The bonus token goes
to survivor min(n, m) + 1; when there is none (the drafts reached the end of the eligible
positions, or the end of the candidates after an EOS cut) it is dropped, which only ends the
call early. Fewer drafts than n only waste copies; they never change the distribution.
The tests (tests/test_generate.py) enumerate the exact joint distribution of the
one-token-per-call process on a tiny context-dependent model and check `draft_tokens` in
{2, 4} (and the one-token-per-call `steps_per_block` path) against it by chi-square.

Arrays: a numpy prompt runs everything on the host (CPU backend sampler); a torch prompt runs
the model on the prompt's device (a CUDA sampler for CUDA tensors) with the bookkeeping of
positions on the host (one small device-to-host copy per call). `cuda_graphs=True` captures
the model call in a CUDA graph per call shape (torch on CUDA); the dds calls stay eager.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple, Union

import numpy as np

_BIG = np.iinfo(np.int64).max


class GenerateResult(NamedTuple):
    """Output of dds.generate."""

    tokens: Any  # [B, L] canvases (prompt + continuation), the prompt's array library
    calls: np.ndarray  # [B] model calls each request took part in
    revealed: np.ndarray  # [B] tokens each request committed
    num_calls: int  # model calls of the run

    @property
    def tokens_per_call(self) -> float:
        """Mean over requests of committed tokens per model call."""
        return float(np.mean(self.revealed / np.maximum(self.calls, 1)))


class _Arrays:
    """The prompt's array library: numpy on the host, or torch on one device."""

    def __init__(self, prompt: Any, model: Callable[[Any], Any], cuda_graphs: bool) -> None:
        self.torch = None
        self.model = model
        self.graphs: Optional[Dict[Tuple[int, ...], Any]] = None
        if type(prompt).__module__.startswith("torch"):
            import torch

            self.torch = torch
            self.device = prompt.device
            if cuda_graphs and prompt.is_cuda:
                self.graphs = {}

    def host(self, x: Any) -> np.ndarray:
        return x.cpu().numpy() if self.torch is not None else np.asarray(x)

    def dev(self, a: np.ndarray) -> Any:
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.device) \
            if self.torch is not None else a

    def run(self, tokens: np.ndarray) -> Any:
        """model(tokens) on the device; a CUDA graph per shape with cuda_graphs."""
        x = self.dev(tokens.astype(np.int64))
        if self.graphs is None:
            return self.model(x)
        torch = self.torch
        key = tuple(x.shape)
        if key not in self.graphs:
            static_in = x.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    self.model(static_in)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_out = self.model(static_in)
            self.graphs[key] = (g, static_in, static_out)
        g, static_in, static_out = self.graphs[key]
        static_in.copy_(x)
        g.replay()
        return static_out


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _order_ranks(seeds: np.ndarray, G: int, block: int) -> np.ndarray:
    """rank[b, g]: place of continuation position g in request b's random order (a uniform
    permutation inside each block, blocks in sequence), from the request's seed."""
    with np.errstate(over="ignore"):
        key = _mix64(_mix64(seeds[:, None] ^ np.uint64(0x6F726465722D3031))
                     + np.arange(G, dtype=np.uint64)[None, :] * np.uint64(0x9E3779B97F4A7C15))
    rank = np.empty((seeds.size, G), np.int64)
    for lo in range(0, G, block):
        hi = min(G, lo + block)
        o = np.argsort(key[:, lo:hi], axis=1, kind="stable")
        np.put_along_axis(rank[:, lo:hi], o, lo + np.arange(hi - lo)[None, :], axis=1)
    return rank


def _first_eos(gen: np.ndarray, eos: int) -> np.ndarray:
    """Index of the first EOS of each continuation row (its length when none)."""
    G = gen.shape[1]
    if eos < 0:
        return np.full(gen.shape[0], G, np.int64)
    hit = gen == eos
    return np.where(hit.any(axis=1), hit.argmax(axis=1), G)


def _eligible(gen: np.ndarray, mask: int, eos: int, block: int) -> np.ndarray:
    """Masked positions before the first EOS, in each request's current block (block = 0: in
    any block)."""
    G = gen.shape[1]
    cols = np.arange(G)[None, :]
    el = (gen == mask) & (cols < _first_eos(gen, eos)[:, None])
    if block == 0:
        return el
    first = np.where(el.any(axis=1), el.argmax(axis=1), G)
    blk_lo = (first // block) * block
    return el & (cols >= blk_lo[:, None]) & (cols < (blk_lo + block)[:, None])


def generate(model: Callable[[Any], Any], prompt: Any, *, sampler: Any, gen_length: int,
             mask_token: int, block_length: Optional[int] = None, order: str = "random",
             steps_per_block: Optional[int] = None, draft_tokens: int = 0,
             threshold: Optional[float] = None, temperature: float = 1.0, top_k: int = 0,
             top_p: float = 1.0, eos_token: int = -1, seed: Union[int, Any] = 0,
             cuda_graphs: bool = False) -> GenerateResult:
    """Generate `gen_length` tokens after each prompt row (module docstring for the loop).

    Parameters
    ----------
    model : callable
        `model(tokens)`: tokens `[N, L]` int64 (the prompt's library and device; L = prompt
        length + gen_length) -> logits `[N, L, V]`, V = sampler.vocab_size.
    prompt : array [B, P] of ints (numpy, or a torch tensor)
        B requests with prompts of one length.
    sampler : dds.Sampler
        Backend matching the prompt (CPU for numpy / CPU tensors, CUDA for CUDA tensors); its
        max_rows must hold B * gen_length rows (B * (draft_tokens + 1) with drafts).
    gen_length, block_length : int
        Continuation length; block size (None: one block).
    mask_token, eos_token : int
        The mask token (banned from sampling); the EOS token (-1: none).
    order : "random" or "confidence"
    steps_per_block : int, optional
        Calls per block for the even-share policies (None: block_length, one token per call).
    draft_tokens : int
        With order "random": drafts per call (exact self-speculative decoding); 0 = off.
    threshold : float, optional
        With order "confidence": reveal every token whose probability clears it.
    temperature, top_k, top_p : sampling (docs/sampling.md); temperature 0 is greedy.
    seed : int or array of B ints
        Request b uses seed + b (scalar) or seed[b]: its order, draws and reveals.
    cuda_graphs : bool
        Capture the model call per call shape in a CUDA graph (torch CUDA prompts).

    Returns
    -------
    GenerateResult
    """
    if order not in ("random", "confidence"):
        raise ValueError(f"order: must be 'random' or 'confidence', got {order!r}")
    if draft_tokens < 0 or (draft_tokens and order != "random"):
        raise ValueError(f"draft_tokens: must be >= 0, and only with order 'random' "
                         f"(got {draft_tokens}, order {order!r})")
    if gen_length < 1:
        raise ValueError(f"gen_length: must be >= 1, got {gen_length}")
    block = gen_length if block_length is None else int(block_length)
    if block < 1:
        raise ValueError(f"block_length: must be >= 1, got {block_length}")
    steps = block if steps_per_block is None else int(steps_per_block)
    if steps < 1:
        raise ValueError(f"steps_per_block: must be >= 1, got {steps_per_block}")
    if not 0 <= mask_token < sampler.vocab_size:
        raise ValueError(f"mask_token: {mask_token} is outside [0, {sampler.vocab_size})")
    xa = _Arrays(prompt, model, cuda_graphs)
    prompt_h = xa.host(prompt).astype(np.int64)
    if prompt_h.ndim != 2:
        raise ValueError(f"prompt: expected [batch, prompt_length], got shape {prompt_h.shape}")
    B, P = prompt_h.shape
    if np.ndim(seed) == 0:
        seeds = np.uint64(int(seed)) + np.arange(B, dtype=np.uint64)
    else:
        seeds = np.asarray(seed).astype(np.uint64).reshape(-1)
        if seeds.size != B:
            raise ValueError(f"seed: {seeds.size} seeds for {B} requests")
    canvas = np.concatenate([prompt_h, np.full((B, gen_length), mask_token, np.int64)], axis=1)
    common = dict(temperature=temperature, top_k=top_k, top_p=top_p, banned_token=mask_token)
    if draft_tokens:
        res = _speculative(xa, sampler, canvas, P, block, draft_tokens, mask_token, eos_token,
                           seeds, common)
    else:
        res = _stepped(xa, sampler, canvas, P, block, steps, order, threshold, mask_token,
                       eos_token, seeds, common)
    canvas, calls, revealed, num_calls = res
    gen = canvas[:, P:]
    if eos_token >= 0:
        fe = _first_eos(gen, eos_token)
        gen[np.arange(gen.shape[1])[None, :] > fe[:, None]] = eos_token
    out = xa.dev(canvas.astype(prompt_h.dtype)) if xa.torch is not None else canvas
    return GenerateResult(out, calls, revealed, num_calls)


def _stepped(xa: _Arrays, s: Any, canvas: np.ndarray, P: int, block: int, steps: int,
             order: str, threshold: Optional[float], mask: int, eos: int, seeds: np.ndarray,
             common: dict) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Random (even share) and confidence orders: sample the block, reveal, per call."""
    B, L = canvas.shape
    G = L - P
    V = s.vocab_size
    calls = np.zeros(B, np.int64)
    revealed = np.zeros(B, np.int64)
    steps_left = np.full(B, steps, np.int64)
    cur_block = np.full(B, -1, np.int64)
    n = 0
    while True:
        gen = canvas[:, P:]
        el = _eligible(gen, mask, eos, block)
        cnt = el.sum(axis=1)
        active = np.nonzero(cnt)[0]
        if active.size == 0:
            break
        blk = np.where(cnt > 0, el.argmax(axis=1) // block, -1)
        steps_left[blk != cur_block] = steps  # a new block starts its step budget
        cur_block = blk
        logits = xa.run(canvas[active])
        ai, pos = np.nonzero(el[active])  # rows: active request ai, continuation position pos
        x = logits.reshape(-1, V)[xa.dev(ai * L + P + pos)]
        offs = np.concatenate([[0], np.cumsum(cnt[active])])
        outs = ("tokens", "logprobs") if order == "confidence" else ("tokens",)
        r = s.sample(x, row_offsets=offs, positions=pos.astype(np.int32), seed=seeds[active],
                     step=n, outputs=outs, **common)
        sl = np.maximum(steps_left[active], 1)
        if order == "confidence":
            scores = xa.torch.exp(r.logprobs) if xa.torch is not None else np.exp(r.logprobs)
            kw = (dict(policy="threshold", threshold=float(threshold)) if threshold is not None
                  else dict(policy="top_n", count=0, steps_left=sl))
        else:
            scores = xa.dev(np.zeros(pos.size, np.float32))
            kw = dict(policy="random", count=0, steps_left=sl)
        rv = s.reveal(scores, row_offsets=offs, positions=pos.astype(np.int32),
                      seed=seeds[active], step=n, **kw)
        hit = xa.host(rv.reveal).astype(bool)
        canvas[active[ai[hit]], P + pos[hit]] = xa.host(r.tokens)[hit]
        revealed[active] += np.bincount(ai[hit], minlength=active.size)
        calls[active] += 1
        steps_left[active] -= 1
        n += 1
    return canvas, calls, revealed, n


def _candidates(gen: np.ndarray, rank: np.ndarray, mask: int, eos: int,
                k: int) -> Tuple[np.ndarray, np.ndarray]:
    """The next k eligible positions of each request's order: (positions [B, k], valid). The
    order is block-major, so its first eligible positions are those of the current block, and
    the candidates run on into the next block when the current one has fewer than k."""
    el = _eligible(gen, mask, eos, 0)
    key = np.where(el, rank, _BIG)
    idx = np.argsort(key, axis=1, kind="stable")[:, :k]
    valid = np.take_along_axis(key, idx, axis=1) < _BIG
    if idx.shape[1] < k:  # fewer positions than candidates
        pad = ((0, 0), (0, k - idx.shape[1]))
        idx, valid = np.pad(idx, pad), np.pad(valid, pad)
    return idx, valid


def _speculative(xa: _Arrays, s: Any, canvas: np.ndarray, P: int, block: int, n: int,
                 mask: int, eos: int, seeds: np.ndarray,
                 common: dict) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Exact self-speculative decoding of the one-token-per-call random order (docstring)."""
    B, L = canvas.shape
    G = L - P
    V = s.vocab_size
    k = n + 1
    rank = _order_ranks(seeds, G, block)
    calls = np.zeros(B, np.int64)
    revealed = np.zeros(B, np.int64)
    cand, valid = _candidates(canvas[:, P:], rank, mask, eos, k)
    dtok = np.zeros((B, k), np.int64)  # draft token of each candidate
    have = np.zeros(B, bool)  # drafts exist (from the previous call)
    Q = None  # device rows of the drafts' logits, request b at rows b*k .. b*k + k - 1
    call = 0
    ar_k = np.arange(k)
    while True:
        active = np.nonzero(valid[:, 0])[0]
        if active.size == 0:
            break
        A = active.size
        c, v, d = cand[active], valid[active].copy(), dtok[active]
        hv = have[active]
        if eos >= 0:  # a draft EOS at pi_i makes later candidates after pi_i ineligible
            for i in range(n):
                cut = hv & v[:, i] & (d[:, i] == eos)
                v[:, i + 1:] &= ~(cut[:, None] & (c[:, i + 1:] > c[:, i:i + 1]))
        o = np.argsort(~v, axis=1, kind="stable")  # survivors first, in order
        pi = np.take_along_axis(c, o, axis=1)
        dpi = np.take_along_axis(d, o, axis=1)
        m = v.sum(axis=1)
        # verify a draft wherever its position exists (whatever the draft is: choosing whether
        # to use d_i from d_i's own value would bias it); the bonus slot nb may not exist
        nb = np.where(hv, np.minimum(n, m), 0)
        has_bonus = nb < m
        pi = np.where(ar_k[None, :] < m[:, None], pi, pi[:, :1])  # unused slots: any position
        # copies: copy i holds drafts 0 .. i-1
        copies = np.repeat(canvas[active][:, None, :], k, axis=1)
        for i in range(1, k):
            sel = np.nonzero(nb >= i)[0]
            copies[sel, i:, P + pi[sel, i - 1]] = dpi[sel, i - 1][:, None]
        logits = xa.run(copies.reshape(A * k, L))
        flat = logits.reshape(-1, V)
        tgt_rows = ((np.arange(A)[:, None] * k + ar_k[None, :]) * L + P + pi).reshape(-1)
        target = flat[xa.dev(tgt_rows)]
        if Q is not None and hv.any():
            qrows = (active[:, None] * k + np.take_along_axis(
                np.broadcast_to(ar_k, (A, k)), o, axis=1))[:, :n].reshape(-1)
            draft = Q[xa.dev(qrows)]
        else:
            draft = target[:A * n]
        r = s.verify_drafts(target, draft, dpi[:, :n].astype(np.int32),
                            draft_counts=nb.astype(np.int32), seed=seeds[active], step=call,
                            outputs=("accepted_counts", "tokens"), **common)
        acc = xa.host(r.accepted_counts).astype(np.int64)
        toks = xa.host(r.tokens).astype(np.int64)
        ncommit = acc + ((acc < nb) | has_bonus)  # no position for the bonus: dropped
        commit = ar_k[None, :] < ncommit[:, None]
        rows, cols = np.nonzero(commit)
        canvas[active[rows], P + pi[rows, cols]] = toks[rows, cols]
        revealed[active] += ncommit
        calls[active] += 1
        # drafts for the next call: the next candidates, drawn from copy `acc`'s rows
        cand_a, valid_a = _candidates(canvas[active][:, P:], rank[active], mask, eos, k)
        cand[active], valid[active] = cand_a, valid_a
        src = ((np.arange(A) * k + acc)[:, None] * L + P + cand_a).reshape(-1)
        qnew = flat[xa.dev(src)]
        dr = s.sample(qnew, row_offsets=np.arange(A + 1) * k,
                      positions=cand_a.reshape(-1).astype(np.int32), seed=seeds[active],
                      step=call, **common)
        dtok[active] = xa.host(dr.tokens).reshape(A, k)
        if Q is None:
            Q = qnew.new_zeros((B * k, V)) if xa.torch is not None else \
                np.zeros((B * k, V), qnew.dtype)
        Q[xa.dev((active[:, None] * k + ar_k[None, :]).reshape(-1))] = qnew
        have[active] = True
        call += 1
    return canvas, calls, revealed, call
