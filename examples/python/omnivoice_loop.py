#!/usr/bin/env python3
"""An OmniVoice-shaped masked-diffusion decode loop on dds (a stand-in model, real loop).

OmniVoice generates audio codes on a canvas of C = 8 codebooks x T frames (V = 1025 classes,
class 1024 the mask token). Every canvas starts fully masked; each of N steps (16-32)
  1. runs the model on every request's canvas: conditional logits for all requests, and
     unconditional logits (the model without its text conditioning) only for the requests that
     use classifier-free guidance;
  2. samples every cell with `dds.omnivoice.OmniVoiceSampler.sample` - one dds call for the
     whole batch, guided and unguided requests mixed, OmniVoice's log-softmax guidance, top-ratio
     filter, Gumbel sampling at the request's temperature, mask token banned - which returns the
     tokens and their guided log-probabilities;
  3. reveals per request the number of cells its schedule gives this step (OmniVoice's shifted
     time schedule), ranked by log-probability minus a layer penalty (`layer * 5`) with
     Gumbel noise at the position temperature, among the still-masked cells: one
     `Sampler.reveal` call (policy top_n, per-request counts, position_temperature), which also
     writes the revealed tokens into the canvases.
The model is a stand-in (random embeddings; each cell sees its left / right frame and the
codebook above, plus a per-request "text" vector that the unconditional pass drops), so the
codes mean nothing; the shapes, calls and schedule are OmniVoice's.

numpy on the CPU backend; torch on the GPU (the model too) when torch sees a CUDA device and
libdds has the CUDA backend. `--backend cpu|cuda|auto`, `--frames 40,25,33` (T per request),
`--steps 24`. Prints the time of every step (model / sample / reveal / whole step, each phase
ended by a device synchronisation so it can be told apart) and, at the end, their means over
the steps after the first (which builds the sampler's per-batch arrays and warms up); `--quiet`
prints the summary only. Exits 0 when every canvas is fully revealed, no cell holds the mask
token and every step revealed its scheduled count. Timing it on a GPU (summary only: --quiet):
    python examples/python/omnivoice_loop.py --backend cuda --frames 250,250,250,250 --steps 32
"""

import argparse
import math
import sys
import time

import numpy as np

import dds
from dds.omnivoice import OmniVoiceSampler, RequestConfig

C, V, MASK, H = 8, 1025, 1024, 32
LAYER_PENALTY, POSITION_TEMPERATURE, T_SHIFT = 5.0, 5.0, 0.1


def reveal_schedule(total, steps, t_shift=T_SHIFT):
    """Cells to reveal per step: the gaps of the shifted time ramp t' = s t / (1 + (s - 1) t),
    rounded up, the last step taking what is left (OmniVoice's schedule)."""
    t = np.linspace(0.0, 1.0, steps + 1)
    t = t_shift * t / (1 + (t_shift - 1) * t)
    out, left = [], total
    for i in range(steps):
        n = left if i == steps - 1 else min(math.ceil(total * (t[i + 1] - t[i])), left)
        out.append(int(n))
        left -= n
    return out


class StandInModel:
    """logits[c, p] = tanh(E[left] + E[right] + E[above] + B[c] + text) @ W[c] (numpy or torch)."""

    def __init__(self, kind, num_requests, seed=0):
        rng = np.random.default_rng(seed)
        E = (rng.standard_normal((V, H)) / 2).astype(np.float32)
        B = rng.standard_normal((C, H)).astype(np.float32)
        W = (rng.standard_normal((C, H, V)) * 1.5).astype(np.float32)
        W[:, :, MASK] *= 0.3
        text = rng.standard_normal((num_requests, H)).astype(np.float32)
        self.kind = kind
        if kind == "cuda":
            import torch

            self.torch = torch
            dev = torch.device("cuda", 0)
            self.E, self.B, self.W, self.text = (torch.from_numpy(a).to(dev)
                                                 for a in (E, B, W, text))
            self.tanh, self.einsum = torch.tanh, torch.einsum
        else:
            self.E, self.B, self.W, self.text = E, B, W, text
            self.tanh, self.einsum = np.tanh, np.einsum

    def __call__(self, cells, req, conditional):
        """cells: [C, P] tokens (requests' frames concatenated; left, right, above are given as
        [C, P] token arrays in `cells`' dict); req: [P] request of each frame."""
        h = self.E[cells["left"]] + self.E[cells["right"]] + self.E[cells["above"]] \
            + self.B[:, None, :]
        if conditional:
            h = h + self.text[req][None, :, :]
        return self.einsum("cph,chv->cpv", self.tanh(h), self.W)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--frames", default="40,25,33")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    kind = args.backend
    if kind in ("auto", "cuda"):
        try:
            import torch

            ok = torch.cuda.is_available() and dds.has_cuda()
        except ImportError:
            ok = False
        if not ok and kind == "cuda":
            print("--backend cuda: needs torch with a CUDA device and libdds with CUDA",
                  file=sys.stderr)
            return 2
        kind = "cuda" if ok else "cpu"
    frames = [int(f) for f in args.frames.split(",")]
    R, P = len(frames), sum(frames)
    cfgs = [RequestConfig(guidance_scale=[2.0, 0.0, 3.0][r % 3],
                          temperature=[0.9, 1.0, 0.0][r % 3], seed=1000 + r) for r in range(R)]
    guided = [c.guidance_scale != 0 for c in cfgs]
    model = StandInModel(kind, R)
    starts = np.concatenate([[0], np.cumsum(frames)[:-1]])
    req = np.repeat(np.arange(R), frames)
    # [C, P] cell (c, p) of request r, frame t -> index c * T_r + t of the request's canvas
    # row; reveal rows are request-major, c-major inside a request (row index = canvas index)
    perm = np.concatenate([(np.arange(C)[:, None] * P + starts[r] + np.arange(n)).reshape(-1)
                           for r, n in enumerate(frames)])
    roffs = np.concatenate([[0], np.cumsum([C * n for n in frames])]).astype(np.int32)
    layer = np.repeat(np.arange(C, dtype=np.float32), P)
    guided_frames = np.concatenate([np.arange(starts[r], starts[r] + n)
                                    for r, n in enumerate(frames) if guided[r]] or [[]]).astype(
        np.int64)
    schedules = [reveal_schedule(C * n, args.steps) for n in frames]
    canvas_np = np.full((R, C * max(frames)), MASK, np.int32)

    if kind == "cuda":
        import torch

        dev = torch.device("cuda", 0)
        to = lambda a: torch.as_tensor(a, device=dev)  # noqa: E731
        sync = torch.cuda.synchronize
        where = lambda m, a, b: torch.where(m, a, b).long()  # noqa: E731
    else:
        where = np.where
        to = lambda a: a  # noqa: E731
        sync = lambda: None  # noqa: E731
    canvas = to(canvas_np)
    perm_d, layer_d, req_d, gf_d = to(perm), to(layer), to(req), to(guided_frames)
    # neighbour gathers: flat canvas index of (c, p)'s left / right / above cell, or -1 (MASK)
    t_of = np.arange(P) - starts[req]
    base = req * canvas_np.shape[1]
    nbr = {}
    for name, dc, dt in (("left", 0, -1), ("right", 0, 1), ("above", -1, 0)):
        cc = np.arange(C)[:, None] + dc
        tt = t_of[None, :] + dt
        ok = (cc >= 0) & (tt >= 0) & (tt < np.array(frames)[req][None, :])
        idx = base[None, :] + cc * np.array(frames)[req][None, :] + tt
        nbr[name] = (to(np.where(ok, idx, 0)), to(ok))
    mask_d = to(np.full((C, P), MASK, np.int32))

    print(f"dds {dds.__version__}: backend {kind}; {R} requests, C={C} x T={frames}, V={V}, "
          f"{args.steps} steps, guidance {[c.guidance_scale for c in cfgs]}, temperature "
          f"{[c.temperature for c in cfgs]}")
    ovs = OmniVoiceSampler(V, C, MASK, backend=kind, max_positions=P, max_requests=R)
    for r, cfg in enumerate(cfgs):
        ovs.ingest_request(r, cfg)
    rev = dds.Sampler(V, backend=kind, max_rows=C * P, max_requests=R)
    ok_counts = True
    times = np.zeros((args.steps, 3))
    for step in range(args.steps):
        t0 = time.perf_counter()
        flat = canvas.reshape(-1)
        cells = {k: where(okm, flat[i], mask_d) for k, (i, okm) in nbr.items()}
        c_logits = model(cells, req_d, True)
        u_logits = (model({k: v[:, gf_d] for k, v in cells.items()}, req_d[gf_d], False)
                    if any(guided) else None)
        sync()
        t1 = time.perf_counter()
        tokens, logprobs = ovs.sample(list(range(R)), c_logits, u_logits, frames, [step] * R)
        sync()
        t2 = time.perf_counter()
        scores = (logprobs.reshape(-1) - LAYER_PENALTY * layer_d)[perm_d]
        toks = tokens.reshape(-1)[perm_d]
        toks = toks.int() if kind == "cuda" else toks.astype(np.int32)
        eligible = (canvas.reshape(-1)[
            to(np.concatenate([r * canvas_np.shape[1] + np.arange(C * n)
                               for r, n in enumerate(frames)]))] == MASK)
        counts = np.array([s[step] for s in schedules], np.int32)
        res = rev.reveal(scores, row_offsets=roffs, eligible=eligible, count=counts,
                         position_temperature=POSITION_TEMPERATURE, seed=[c.seed for c in cfgs],
                         step=step, canvas=canvas, tokens=toks, mask_token=MASK,
                         outputs=("reveal", "num_revealed"))
        sync()
        t3 = time.perf_counter()
        times[step] = (t1 - t0, t2 - t1, t3 - t2)
        got = np.asarray(res.num_revealed.cpu() if kind == "cuda" else res.num_revealed)
        ok_counts &= bool(np.array_equal(got, counts))
        if not args.quiet:
            print(f"step {step:2d}  model {1e3 * (t1 - t0):7.2f} ms  sample "
                  f"{1e3 * (t2 - t1):6.3f} ms  reveal {1e3 * (t3 - t2):6.3f} ms  step "
                  f"{1e3 * (t3 - t0):7.2f} ms  revealed {got.tolist()}")
    final = np.asarray(canvas.cpu() if kind == "cuda" else canvas)
    left = sum(int((final[r, :C * n] == MASK).sum()) for r, n in enumerate(frames))
    ms = 1e3 * times[1:].mean(axis=0) if args.steps > 1 else 1e3 * times[0]
    print(f"{'done' if left == 0 and ok_counts else 'NOT done'}: {left} masked cells left; per "
          f"step (mean of steps 1..{args.steps - 1}): model {ms[0]:.2f} ms, sample {ms[1]:.3f} "
          f"ms, reveal {ms[2]:.3f} ms, step {ms.sum():.2f} ms; first step "
          f"{1e3 * times[0].sum():.2f} ms")
    for r, n in enumerate(frames):
        print(f"   request {r}: codebook 0 {final[r, :min(n, 12)].tolist()} ...")
    ovs.close()
    rev.close()
    return 0 if left == 0 and ok_counts else 1


if __name__ == "__main__":
    sys.exit(main())
