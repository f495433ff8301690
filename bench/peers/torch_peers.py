"""PyTorch implementations of one masked-diffusion sampling step, written for this benchmark.

The same work as dds_sample: guidance l = c + g (c - u), temperature, top-k, top-p, min-p (in that
order, each renormalising), Gumbel-max sampling (float32 noise as most engines use, or float64
noise as LLaDA's `add_gumbel_noise` does), then the token's log-probability, confidence (max
probability), margin (p1 - p2), entropy, and optionally the probabilities in bf16. This is the
shape of the samplers in LLaDA / Dream / Fast-dLLM / Fugue code bases.
"""
import torch


def filtered_logits(x, top_k=0, top_p=1.0, min_p=0.0):
    """x: float32 [rows, V] tempered logits -> logits with filtered tokens at -inf."""
    if top_k and 0 < top_k < x.shape[-1]:
        kth = torch.topk(x, top_k, dim=-1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p < 1.0:
        sorted_x, idx = torch.sort(x, dim=-1, descending=True)
        probs = torch.softmax(sorted_x, dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # mass before each token
        drop = before >= top_p
        drop[:, 0] = False
        sorted_x = sorted_x.masked_fill(drop, float("-inf"))
        x = torch.empty_like(x).scatter_(-1, idx, sorted_x)
    if min_p > 0.0:
        probs = torch.softmax(x, dim=-1)
        x = x.masked_fill(probs < min_p * probs.max(dim=-1, keepdim=True).values, float("-inf"))
    return x


def step(logits, uncond=None, guidance=0.0, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
         noise64=False, probs_bf16=False, generator=None):
    x = logits.float()
    if uncond is not None and guidance != 0.0:
        x = x + guidance * (x - uncond.float())
    x = x / temperature
    x = filtered_logits(x, top_k, top_p, min_p)
    logp = torch.log_softmax(x, dim=-1)
    if noise64:
        u = torch.rand(x.shape, dtype=torch.float64, device=x.device, generator=generator)
        g = -torch.log(-torch.log(u))
        tokens = torch.argmax(x.double() + g, dim=-1)
    else:
        u = torch.rand(x.shape, dtype=torch.float32, device=x.device, generator=generator)
        u = u.clamp_min(1e-10)
        g = -torch.log(-torch.log(u))
        tokens = torch.argmax(x + g, dim=-1)
    token_logp = logp.gather(-1, tokens[:, None])[:, 0]
    p = logp.exp()
    top2 = torch.topk(p, 2, dim=-1).values if p.shape[-1] > 1 else torch.cat(
        [p, torch.zeros_like(p)], -1)
    confidence = top2[:, 0]
    margin = top2[:, 0] - top2[:, 1]
    entropy = -(p * logp).nan_to_num(0.0).sum(-1)
    out = {"tokens": tokens, "logprobs": token_logp, "confidence": confidence,
           "margin": margin, "entropy": entropy}
    if probs_bf16:
        out["probs"] = p.to(torch.bfloat16)
    return out


def exact_distribution(logits, uncond=None, guidance=0.0, temperature=1.0, top_k=0, top_p=1.0,
                       min_p=0.0, strict_top_k=False):
    """float64 reference distribution of one row [V] (for the statistical check).

    Top-k ties: the PyTorch peers keep every token tied with the k-th value (the usual
    `x < kth` mask); dds keeps exactly k, ties to the lower token id (strict_top_k=True). With
    bf16 logits such ties at the boundary are common, so each peer is checked against its own
    rule."""
    x = logits.double()[None]
    if uncond is not None and guidance != 0.0:
        x = x + guidance * (x - uncond.double()[None])
    x = x / temperature
    if strict_top_k and top_k and 0 < top_k < x.shape[-1]:
        _, idx = torch.sort(x, dim=-1, descending=True, stable=True)  # ties: lower id first
        drop = torch.ones_like(x, dtype=torch.bool)
        drop.scatter_(-1, idx[:, :top_k], False)
        x = x.masked_fill(drop, float("-inf"))
        top_k = 0
    x = filtered_logits(x, top_k, top_p, min_p)
    return torch.softmax(x, dim=-1)[0]
