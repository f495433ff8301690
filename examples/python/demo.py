#!/usr/bin/env python3
"""dds decode-loop demo in Python: a small masked-diffusion decoder around Sampler.sample.

The "model" is a character bigram table counted from a paragraph of text (63 characters plus a
MASK token). Two requests share every step, each with a canvas that starts as a short prompt
followed by MASK. Each step
  1. the model scores every still-masked position of both canvases from its revealed left and
     right neighbours: log P(x | left) + log P(right | x) - only the masked rows are packed (a
     ragged number per request) and `positions` gives each row's canvas position, so the random
     numbers do not depend on the packing;
  2. dds samples a token per row with per-request temperature and top-p; request 1 also uses
     classifier-free guidance (its unconditional rows: the model without context), request 0
     does not - a mixed batch. The MASK token is banned; statistics are "guided" (what LLaDA /
     Fast-dLLM rank positions by);
  3. each request reveals its most confident positions (the rest of the canvas evenly over the
     remaining steps); the canvases are printed with the step's time.

Arrays: numpy on the CPU backend; torch tensors on the GPU (the model runs on the device too)
when torch sees a CUDA device and libdds has the CUDA backend. --backend cpu|cuda|auto.
Exit status 0 when both canvases are fully revealed with no MASK and no request flags.
"""

import argparse
import math
import sys
import time

import numpy as np

import dds

TEXT = (
    "the sampler draws one token for every masked position of the canvas at once. a diffusion "
    "model reveals the positions it is most sure of, then scores the rest again. rows of many "
    "requests are packed together, so the sampler must be fast, exact and the same on any "
    "batch. Counter-based random numbers make every draw a pure function of the seed, the "
    "step and the position: a request samples the same tokens alone or in a crowd, on the CPU "
    "or on the GPU, in a CUDA graph or out of one. Quick brown foxes jump over lazy dogs!"
)
CHARS = sorted(set(TEXT))[:63]
V = len(CHARS) + 1
MASK = V - 1
IDX = {c: i for i, c in enumerate(CHARS)}
SHOW = CHARS + ["_"]


def bigram_tables():
    """log P(b | a) and log P(a | b) - log P(a) style tables, add-0.01 smoothed, [V, V] f32."""
    counts = np.full((V, V), 0.01)
    ids = [IDX[c] for c in TEXT if c in IDX]
    for a, b in zip(ids[:-1], ids[1:]):
        counts[a, b] += 1
    counts[:, MASK] = counts[MASK, :] = 1e-9
    fwd = np.log(counts / counts.sum(axis=1, keepdims=True))  # [left, x]: log P(x | left)
    bwd = np.log(counts / counts.sum(axis=0, keepdims=True)).T  # [right, x]: log P(x | right)
    uni = np.log(counts.sum(axis=0) / counts.sum())
    return fwd.astype(np.float32), bwd.astype(np.float32), uni.astype(np.float32)


class Backend:
    """numpy on the host, or torch on a CUDA device: the few array operations the demo needs."""

    def __init__(self, kind):
        self.kind = kind
        fwd, bwd, uni = bigram_tables()
        if kind == "cuda":
            import torch

            self.torch = torch
            self.dev = torch.device("cuda", 0)
            self.fwd, self.bwd, self.uni = (torch.from_numpy(t).to(self.dev)
                                            for t in (fwd, bwd, uni))
        else:
            self.fwd, self.bwd, self.uni = fwd, bwd, uni

    def asarray(self, a, dtype):
        if self.kind == "cuda":
            return self.torch.as_tensor(np.asarray(a, dtype), device=self.dev)
        return np.asarray(a, dtype)

    def to_host(self, a):
        return a.cpu().numpy() if self.kind == "cuda" else a

    def sync(self):
        if self.kind == "cuda":
            self.torch.cuda.synchronize()

    def score(self, left, right):
        """Logits [rows, V] of masked positions with left / right neighbour ids (MASK: none)."""
        has_l = (left != MASK)[:, None]
        has_r = (right != MASK)[:, None]
        if self.kind == "cuda":
            has_l, has_r = has_l.float(), has_r.float()
        else:
            has_l, has_r = has_l.astype(np.float32), has_r.astype(np.float32)
        cond = self.uni[None, :] + has_l * (self.fwd[left] - self.uni[None, :]) \
            + has_r * (self.bwd[right] - self.uni[None, :])
        uncond = self.uni[None, :] + 0.0 * cond
        return cond, uncond


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()

    kind = args.backend
    why = ""
    if kind in ("auto", "cuda"):
        try:
            import torch

            ok = torch.cuda.is_available() and dds.has_cuda()
            why = ("" if ok else "torch sees no CUDA device" if not torch.cuda.is_available()
                   else "libdds has no CUDA backend")
        except ImportError:
            ok, why = False, "torch is not installed"
        if not ok and kind == "cuda":
            print(f"--backend cuda: {why}", file=sys.stderr)
            return 2
        kind = "cuda" if ok else "cpu"
    be = Backend(kind)
    print(f"dds {dds.__version__}: backend {kind}"
          + (f" (CPU because {why})" if why and kind == "cpu" else "")
          + f"; vocab {V}, 2 requests x {args.length} positions, {args.steps} steps")

    prompts = ["the sampler ", "Quick brown "]
    L = args.length
    canvas = np.full((2, L), MASK, np.int64)
    for r, p in enumerate(prompts):
        canvas[r, :len(p)] = [IDX[c] for c in p]
    temps = [0.6, 0.8]
    top_ps = [0.9, 0.95]
    guidance = [0.0, 1.5]
    seeds = np.array([args.seed, args.seed + 1], np.uint64)
    flags = 0
    total = 0.0
    with dds.Sampler(vocab_size=V, backend=kind, max_rows=2 * L, max_requests=2) as s:
        for step in range(args.steps):
            masked = [np.nonzero(canvas[r] == MASK)[0] for r in range(2)]
            if not any(len(m) for m in masked):
                break
            live = [r for r in range(2) if len(masked[r])]
            pos = np.concatenate([masked[r] for r in live]).astype(np.int32)
            req = np.concatenate([[r] * len(masked[r]) for r in live])
            left = np.where(pos > 0, canvas[req, np.maximum(pos - 1, 0)], MASK)
            right = np.where(pos < L - 1, canvas[req, np.minimum(pos + 1, L - 1)], MASK)
            offs = np.concatenate([[0], np.cumsum([len(masked[r]) for r in live])]).astype(
                np.int32)
            t0 = time.perf_counter()
            cond, uncond = be.score(be.asarray(left, np.int64), be.asarray(right, np.int64))
            # request r's uncond rows: the rows of the guided requests, in the same order
            res = s.sample(cond, row_offsets=offs, positions=pos, uncond_logits=uncond,
                           uncond_row_offsets=[offs[i] if guidance[r] else -1
                                               for i, r in enumerate(live)],
                           guidance_scale=[guidance[r] for r in live],
                           temperature=[temps[r] for r in live], top_p=[top_ps[r] for r in live],
                           seed=seeds[live], step=step, banned_token=MASK, stats="guided",
                           outputs=("tokens", "confidence", "request_status"))
            be.sync()
            dt = time.perf_counter() - t0
            total += dt
            tokens, conf = be.to_host(res.tokens), be.to_host(res.confidence)
            flags |= int(np.bitwise_or.reduce(be.to_host(res.request_status)))
            steps_left = args.steps - step
            for i, r in enumerate(live):
                lo, hi = offs[i], offs[i + 1]
                n = math.ceil((hi - lo) / steps_left)
                best = lo + np.argsort(-conf[lo:hi], kind="stable")[:n]
                canvas[r, pos[best]] = tokens[best]
            print(f"step {step:2d}  {dt * 1e3:7.2f} ms  rows {len(pos):3d}")
            for r in range(2):
                print("   |" + "".join(SHOW[t] for t in canvas[r]) + "|")
    done = not np.any(canvas == MASK)
    print(f"{'done' if done else 'NOT done'} in {total * 1e3:.2f} ms of sampling steps "
          f"({total / max(1, args.steps) * 1e3:.2f} ms/step incl. the model); request flags "
          f"{flags}")
    return 0 if done and flags == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
