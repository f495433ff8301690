"""Triton kernels written for this benchmark.

- `read_floor`: a plain read of every byte of a tensor (one partial sum per program): the
  one-read floor, measured in the same run as every peer.
- `copy_floor`: read a tensor once and write it once as bf16 (the floor of sampling with a bf16
  probabilities output).
- `onepass_sample`: a one-pass row kernel in the style of an engine's fused sampler: online
  max / sum-exp / sum p*x over the row with per-token Philox Gumbel noise (tl.rand, fp32), giving
  the token, its log-probability, the confidence and the entropy (no filters, no margin).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * BLOCK * ITERS
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(ITERS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, 0))


def read_floor(x, out=None):
    n = x.numel()
    BLOCK, ITERS = 2048, 8
    grid = triton.cdiv(n, BLOCK * ITERS)
    if out is None or out.numel() < grid:
        out = torch.empty(grid, dtype=torch.float32, device=x.device)
    _read_kernel[(grid,)](x, out, n, BLOCK=BLOCK, ITERS=ITERS)
    return out


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, v.to(tl.bfloat16), mask=offs < n)


def copy_floor(x, y):
    n = x.numel()
    BLOCK = 4096
    _copy_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)


@triton.jit
def _onepass_kernel(x_ptr, stride, V, seed, tok_ptr, lp_ptr, conf_ptr, ent_ptr, inv_t,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * stride
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    sx = tl.zeros([BLOCK], tl.float32)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    best_i = tl.zeros([BLOCK], tl.int32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < V
        x = tl.load(base + offs, mask=mask, other=float("-inf")).to(tl.float32) * inv_t
        m_new = tl.maximum(m, x)
        scale = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        e = tl.where(mask, tl.exp(x - m_new), 0.0)
        s = s * scale + e
        sx = sx * scale + tl.where(mask, e * x, 0.0)
        m = m_new
        u = tl.rand(seed, row * V + offs)
        u = tl.maximum(u, 1e-10)
        g = x - tl.log(-tl.log(u))
        upd = g > best
        best = tl.where(upd, g, best)
        best_i = tl.where(upd, offs, best_i)
    M = tl.max(m, 0)
    w = tl.where(m == float("-inf"), 0.0, tl.exp(m - M))
    S = tl.sum(s * w, 0)
    SX = tl.sum(sx * w, 0)
    lse = M + tl.log(S)
    b = tl.max(best, 0)
    tok = tl.min(tl.where(best == b, best_i, V), 0)
    xt = tl.load(base + tok).to(tl.float32) * inv_t
    tl.store(tok_ptr + row, tok)
    tl.store(lp_ptr + row, xt - lse)
    tl.store(conf_ptr + row, tl.exp(M - lse))
    tl.store(ent_ptr + row, lse - SX / S)


def onepass_sample(logits, temperature=1.0, seed=0, out=None):
    rows, V = logits.shape
    if out is None:
        out = {k: torch.empty(rows, dtype=torch.float32, device=logits.device)
               for k in ("logprobs", "confidence", "entropy")}
        out["tokens"] = torch.empty(rows, dtype=torch.int32, device=logits.device)
    _onepass_kernel[(rows,)](logits, logits.stride(0), V, seed, out["tokens"], out["logprobs"],
                             out["confidence"], out["entropy"], 1.0 / temperature,
                             BLOCK=1024, num_warps=8)
    return out
