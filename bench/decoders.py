#!/usr/bin/env python3
"""Per-step GPU times of the OmniVoice and Fugue decode loops on dds (torch on CUDA).

1. OmniVoice sampler step (dds.omnivoice.OmniVoiceSampler.sample) against the same step in
   plain torch, written from OmniVoice's contract (log_softmax guidance, forbidden class,
   per-request top-ratio top-k + Gumbel-max, gather of the log-probs), on C = 8 x T frames,
   V = 1025, R requests (every other one guided, iterations differing between requests and
   moving by one per step, as in a decode loop), bf16 and f32 logits. Per call, medians of
   --iters: the host time (the Python call returning, GPU not waited for), the GPU time (CUDA
   events around the call's kernels queued behind a sleep kernel, so host gaps are not
   counted; "sync" marks a call that waited for the GPU) and the wall time (events around
   back-to-back calls: what a loop pays).
2. Fugue loop (dds.generate) with a stand-in model (embedding + one linear layer, V = --vocab,
   canvas --length): time per model call and per committed token, tokens per call, for
   steps_per_block one token per call, draft_tokens 2 and 4, with and without CUDA graphs; the
   model's own time per call (same shapes) is printed so the loop's overhead is visible.

    python bench/decoders.py [--iters 50] [--out results.txt]
Needs torch with CUDA and dds built with the CUDA backend (pip install ./bindings/python).

    python bench/decoders.py --cpu-proxy
runs no GPU: the OmniVoice step on CPU tensors (CPU backend, one torch thread), printing the
torch ops one step dispatches (TorchDispatchMode; on CUDA each but views and allocations is a
kernel launch) and the adapter's host time per step outside the dds call.
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


def split_time(fn, iters):
    """(host ms, GPU ms, synced) per call of fn, medians over iters: host = fn() returning with
    the GPU idle; GPU = CUDA events around fn's work queued behind a sleep kernel long enough
    for the host to finish queueing (so launch gaps do not count); synced = fn waited for the
    GPU (its host time, measured while the sleep runs, reached half the sleep)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    host = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        host.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    h_ms = 1e3 * statistics.median(host)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(10 ** 6)
    b.record()
    b.synchronize()
    ms_per_mcycle = a.elapsed_time(b)
    sleep_ms = 3 * h_ms + 1.0
    cycles = int(sleep_ms / ms_per_mcycle * 1e6)
    gpu, blocked = [], []
    for _ in range(iters):
        torch.cuda._sleep(cycles)
        a.record()
        t0 = time.perf_counter()
        fn()
        blocked.append(time.perf_counter() - t0)
        b.record()
        b.synchronize()
        gpu.append(a.elapsed_time(b))
    return h_ms, statistics.median(gpu), 1e3 * statistics.median(blocked) > 0.5 * sleep_ms


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


def omnivoice_case(R, T, dt, device):
    """An OmniVoice batch: the sampler, and (ids, c, u compact, u full, guidance per position,
    lens); every other request guided."""
    P = R * T
    g = torch.Generator(device=device).manual_seed(R * 1000 + T)
    c = torch.randn(C, P, V_OMNI, device=device, generator=g).mul_(2).to(dt)
    guided = [r % 2 == 0 for r in range(R)]
    u_full = (c.float() + torch.randn(C, P, V_OMNI, device=device, generator=g)).to(dt)
    idx = torch.cat([torch.arange(r * T, (r + 1) * T) for r in range(R) if guided[r]])
    u = u_full[:, idx.to(device)].contiguous()
    s = OmniVoiceSampler(V_OMNI, C, MASK_OMNI, backend="cuda" if device == "cuda" else "cpu",
                         max_positions=P, max_requests=R)
    for r in range(R):
        s.ingest_request(r, RequestConfig(guidance_scale=2.0 if guided[r] else 0.0,
                                          temperature=0.9, seed=r + 1))
    gpos = torch.tensor([2.0 if guided[r] else 0.0 for r in range(R) for _ in range(T)],
                        device=device)
    return s, list(range(R)), c, u, u_full, gpos, [T] * R


def loop_iterations(R):
    """A decode loop's iterations: request r is r % 3 steps ahead, all move by one per call."""
    k = [0]

    def nxt():
        k[0] += 1
        return [k[0] + r % 3 for r in range(R)]
    return nxt


def bench_omnivoice(iters, log):
    log("== OmniVoice sampler step: C = 8, V = 1025, every other request guided; ms per call "
        "(host / GPU / wall) ==")
    log(f"{'R':>3s} {'T':>5s} {'dtype':>6s} {'dds host':>9s} {'dds GPU':>8s} {'dds wall':>9s} "
        f"{'torch host':>10s} {'torch GPU':>9s} {'torch wall':>10s} {'speed-up':>8s}")
    for R, T in ((1, 250), (8, 250), (32, 250), (64, 125)):
        for dt in (torch.bfloat16, torch.float32):
            s, ids, c, u, u_full, g, lens = omnivoice_case(R, T, dt, "cuda")
            it = loop_iterations(R)
            step = lambda: s.sample(ids, c, u, lens, it())  # noqa: E731
            ref = lambda: torch_omnivoice_step(c, u_full, g, [0.9] * R, lens, 0.1,  # noqa: E731
                                               MASK_OMNI)
            h, gp, synced = split_time(step, iters)
            rh, rg, rsynced = split_time(ref, iters)
            w, rw = cuda_time(step, iters), cuda_time(ref, iters)
            mark = lambda x: " sync" if x else "     "  # noqa: E731
            log(f"{R:3d} {T:5d} {str(dt)[6:]:>6s} {h:9.3f} {gp:8.3f}{mark(synced)} {w:9.3f} "
                f"{rh:10.3f} {rg:9.3f}{mark(rsynced)} {rw:10.3f} {rw / w:7.2f}x")
            s.close()


def cpu_proxy(log):
    """The OmniVoice step on CPU tensors: torch ops per step and adapter host time."""
    from collections import Counter

    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func).replace("aten.", ""))
            return func(*args, **(kwargs or {}))

    torch.set_num_threads(1)
    log("== OmniVoice step on CPU tensors (CPU backend): torch ops per step; host ms per step "
        "outside the dds call (median; it includes the ops' CPU work, which 2 x 4 frames make "
        "negligible) ==")
    for R, T, n in ((1, 250, 20), (64, 125, 3), (2, 4, 200)):
        s, ids, c, u, _, _, lens = omnivoice_case(R, T, torch.bfloat16, "cpu")
        inner, t_in = s.sampler.sample, []

        def timed(*a, **k):
            t0 = time.perf_counter()
            out = inner(*a, **k)
            t_in.append(time.perf_counter() - t0)
            return out
        s.sampler.sample = timed
        it = loop_iterations(R)
        for _ in range(2):
            s.sample(ids, c, u, lens, it())
        with Ops() as m:
            s.sample(ids, c, u, lens, it())
        t_in.clear()
        tot = []
        for _ in range(n):
            t0 = time.perf_counter()
            s.sample(ids, c, u, lens, it())
            tot.append(time.perf_counter() - t0)
        host = statistics.median([a - b for a, b in zip(tot, t_in)])
        log(f"R = {R:2d} x T = {T}, bf16: {len(m.ops)} torch ops; adapter host "
            f"{1e3 * host:.3f} ms (dds call {1e3 * statistics.median(t_in):.1f} ms)")
        log("    " + ", ".join(f"{k} {v}" for k, v in Counter(m.ops).items()))
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
    ap.add_argument("--cpu-proxy", action="store_true",
                    help="no GPU: torch ops and host time of the OmniVoice step on CPU tensors")
    args = ap.parse_args()
    if args.cpu_proxy:
        cpu_proxy(print)
        return 0
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
