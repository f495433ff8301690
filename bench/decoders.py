#!/usr/bin/env python3
"""Per-step GPU times of the OmniVoice and Fugue decode loops on dds (torch on CUDA).

1. OmniVoice sampler step (dds.omnivoice.OmniVoiceSampler.sample) against the same step in
   plain torch, written from OmniVoice's contract (log_softmax guidance, forbidden class,
   per-request top-ratio top-k + Gumbel-max, gather of the log-probs), on C = 8 x T frames,
   V = 1025, R requests (every other one guided), bf16 and f32 logits. Median of --iters.
2. Fugue loop (dds.generate) with a stand-in model (embedding + one linear layer, V = --vocab,
   canvas --length): time per model call and per committed token, tokens per call, for
   steps_per_block one token per call, draft_tokens 2 and 4, with and without CUDA graphs; the
   model's own time per call (same shapes) is printed so the loop's overhead is visible.

    python bench/decoders.py [--iters 50] [--out results.txt]
Needs torch with CUDA and dds built with the CUDA backend (pip install ./bindings/python).
"""

import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import dds
from dds.omnivoice import OmniVoiceSampler, RequestConfig

C, V_OMNI, MASK_OMNI = 8, 1025, 1024


def cuda_time(fn, iters):
    """Median milliseconds of fn() over iters runs (CUDA events, after 3 warm-ups)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def torch_omnivoice_step(c, u, guidance, temps, lens, ratio, mask):
    """OmniVoice's scoring in torch: [C, P, V] -> tokens, logprobs (per-request loop for the
    top-k and the Gumbel draw, as the per-request top ratio and seed need)."""
    plain = F.log_softmax(c.float(), dim=-1)
    g = guidance.view(1, -1, 1)
    if u is not None:
        guided = torch.log_softmax(plain + g * (plain - F.log_softmax(u.float(), dim=-1)), -1)
        lp = torch.where(g != 0, guided, plain)
    else:
        lp = plain
    lp[..., mask] = -math.inf
    tokens = torch.empty(lp.shape[:2], dtype=torch.long, device=lp.device)
    start = 0
    for n, T in zip(lens, temps):
        blk = lp[:, start:start + n]
        if T <= 0:
            tokens[:, start:start + n] = blk.argmax(-1)
        else:
            k = max(1, math.ceil(ratio * blk.shape[-1]))
            val, ind = blk.topk(k, dim=-1)
            filt = torch.full_like(blk, -math.inf).scatter_(-1, ind, val)
            gum = -torch.log(-torch.log(torch.rand_like(filt) + 1e-10) + 1e-10)
            tokens[:, start:start + n] = (filt / T + gum).argmax(-1)
        start += n
    return tokens, lp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def bench_omnivoice(iters, log):
    log("== OmniVoice sampler step: C = 8, V = 1025, every other request guided ==")
    log(f"{'R':>3s} {'T':>5s} {'dtype':>6s} {'dds ms':>8s} {'torch ms':>9s} {'speed-up':>8s}")
    for R, T in ((1, 250), (8, 250), (32, 250), (64, 125)):
        for dt in (torch.bfloat16, torch.float32):
            P = R * T
            c = torch.randn(C, P, V_OMNI, device="cuda").mul_(2).to(dt)
            guided = [r % 2 == 0 for r in range(R)]
            u_full = (c.float() + torch.randn_like(c, dtype=torch.float32)).to(dt)
            idx = torch.cat([torch.arange(r * T, (r + 1) * T) for r in range(R) if guided[r]])
            u = u_full[:, idx.cuda()].contiguous()
            s = OmniVoiceSampler(V_OMNI, C, MASK_OMNI, backend="cuda", max_positions=P,
                                 max_requests=R)
            for r in range(R):
                s.ingest_request(r, RequestConfig(guidance_scale=2.0 if guided[r] else 0.0,
                                                  temperature=0.9, seed=r + 1))
            ids, lens = list(range(R)), [T] * R
            t_dds = cuda_time(lambda: s.sample(ids, c, u, lens, [3] * R), iters)
            g = torch.tensor([2.0 if guided[r] else 0.0 for r in range(R)
                              for _ in range(T)], device="cuda")
            t_ref = cuda_time(lambda: torch_omnivoice_step(c, u_full, g, [0.9] * R, lens, 0.1,
                                                           MASK_OMNI), iters)
            log(f"{R:3d} {T:5d} {str(dt)[6:]:>6s} {t_dds:8.3f} {t_ref:9.3f} "
                f"{t_ref / t_dds:7.2f}x")
            s.close()


class StandIn(torch.nn.Module):
    """logits = (embed(tokens) + shift(embed(tokens))) @ W: context-dependent, cheap."""

    def __init__(self, vocab, hidden=256):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, hidden)
        self.out = torch.nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens):
        h = self.emb(tokens)
        h = h + torch.roll(h, 1, dims=1) + torch.roll(h, -1, dims=1)
        return self.out(torch.tanh(h)).float()


@torch.no_grad()
def bench_fugue(args, log):
    log(f"== Fugue loop (dds.generate): V = {args.vocab}, prompt 32, gen {args.length}, "
        f"blocks of 32, batch {args.batch} ==")
    V, L, B = args.vocab, args.length, args.batch
    model = StandIn(V).cuda().eval()
    mask = V - 1
    prompt = torch.randint(0, V - 2, (B, 32), device="cuda")
    s = dds.Sampler(V, backend="cuda", max_rows=B * max(L, 8), max_requests=B)
    log(f"{'mode':24s} {'graphs':>6s} {'calls':>6s} {'tok/call':>8s} {'ms/call':>8s} "
        f"{'ms/token':>8s} {'model ms/call':>13s}")
    for name, kw in (("one token per call", dict(steps_per_block=32)),
                     ("draft_tokens=2", dict(draft_tokens=2)),
                     ("draft_tokens=4", dict(draft_tokens=4)),
                     ("confidence tau=0.9", dict(order="confidence", threshold=0.9))):
        for graphs in (False, True):
            run = lambda: dds.generate(model, prompt, sampler=s, gen_length=L,  # noqa: E731
                                       mask_token=mask, block_length=32, eos_token=V - 2,
                                       temperature=0.8, top_k=50, seed=7, cuda_graphs=graphs,
                                       **kw)
            run()  # warm-up (and graph capture)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            res = run()
            torch.cuda.synchronize()
            dt = (time.perf_counter() - t0) * 1e3
            n = kw.get("draft_tokens", 0) + 1
            x = torch.randint(0, V, (B * n, 32 + L), device="cuda")
            t_model = cuda_time(lambda: model(x), 10)
            toks = float(res.revealed.sum())
            log(f"{name:24s} {str(graphs):>6s} {res.num_calls:6d} {res.tokens_per_call:8.3f} "
                f"{dt / res.num_calls:8.3f} {dt / toks * B:8.3f} {t_model:13.3f}")
    s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not (torch.cuda.is_available() and dds.has_cuda()):
        print("bench/decoders.py: needs a CUDA device and libdds with the CUDA backend",
              file=sys.stderr)
        return 2
    lines = []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)

    log(f"dds {dds.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    bench_omnivoice(args.iters, log)
    bench_fugue(args, log)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
