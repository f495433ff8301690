"""Vocabulary-parallel sampling over torch.distributed (NCCL), one process per GPU:

    torchrun --nproc_per_node=<GPUs> tests/multigpu/torch_shard.py

The docs/vocab_parallel.md section 7 example run for real: every rank builds the same logits
(same generator seed), keeps its column slice on its own GPU, and calls dds.sample_sharded with
dds.torch_all_gather(group) on a CUDA Sampler. Rank 0 checks that every rank's tokens are the
tokens of the CPU backend's Sampler.sample on the unsharded rows (all ranks' tokens are
all-gathered first), and the statistics within 1e-5 relative (the CUDA figures are fp32 / fast
math; the CPU's float64 reference is exact). Exit status 0 only when every config matched.
Label: multigpu (scripts/gpu/check.sh step torch-nccl); needs >= 2 GPUs and the binding
installed with the CUDA backend.
"""

import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import dds

CONFIGS = {
    "plain": dict(),
    "top_k": dict(top_k=50),
    "top_p": dict(top_p=0.9),
    "min_p": dict(min_p=0.05),
    "mixed": dict(top_k=[0, 7, 64], top_p=[0.8, 1.0, 0.95], min_p=[0.0, 0.1, 0.02],
                  temperature=[0.7, 1.3, 1.0]),
    "guided": dict(guidance_scale=[1.5, 0.0, 2.0], top_p=0.95, top_k=20, _uncond=True),
}
OFFSETS = [0, 5, 9, 24]
SEEDS = [101, 202, 303]


def main() -> int:
    dist.init_process_group("nccl")
    rank, R = dist.get_rank(), dist.get_world_size()
    dev = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(dev)
    group = dist.group.WORLD
    failures = 0
    for V in (151936, 3001):  # 151936 / R is not a multiple of 1024; 3001 is ragged everywhere
        rows = OFFSETS[-1]
        g = torch.Generator().manual_seed(V)
        full = (torch.randn(rows, V, generator=g) * 3).float()
        full_u = (torch.randn(rows, V, generator=g) * 3).float()
        lo, hi = rank * V // R, (rank + 1) * V // R
        mine = full[:, lo:hi].contiguous().to(f"cuda:{dev}")
        mine_u = full_u[:, lo:hi].contiguous().to(f"cuda:{dev}")
        for name, cfg in CONFIGS.items():
            kw = dict(cfg)
            guided = kw.pop("_uncond", False)
            common = dict(row_offsets=OFFSETS, seed=SEEDS, step=4, **kw)
            outs = ("tokens", "logprobs", "confidence", "entropy")
            with dds.Sampler(vocab_size=V, backend="cuda", device=dev, max_rows=64) as s:
                r = dds.sample_sharded(s, mine, rank=rank, world_size=R, vocab_offset=lo,
                                       uncond_slices=mine_u if guided else None,
                                       all_gather=dds.torch_all_gather(group), outputs=outs,
                                       **common)
            toks = r.tokens.to(torch.int64)
            every = torch.empty(R * rows, dtype=torch.int64, device=f"cuda:{dev}")
            dist.all_gather_into_tensor(every, toks, group=group)
            if rank == 0:
                with dds.Sampler(vocab_size=V, max_rows=64) as cpu:
                    ref = cpu.sample(full.numpy(), uncond_logits=full_u.numpy() if guided else None,
                                     outputs=outs, **common)
                every_np = every.cpu().numpy().reshape(R, rows)
                ranks_agree = bool((every_np == every_np[0:1]).all())
                ref_tok = np.asarray(ref.tokens, np.int64)
                bad = int((every_np[0] != ref_tok).sum())
                same = every_np[0] == ref_tok
                stat_err = 0.0
                for key in ("logprobs", "confidence", "entropy"):
                    a = getattr(r, key).double().cpu().numpy()
                    b = np.asarray(getattr(ref, key), np.float64)
                    if key == "logprobs":  # the drawn token's own value: where the tokens agree
                        a, b = a[same], b[same]
                    rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-3)
                    stat_err = max(stat_err, float(rel.max()) if rel.size else 0.0)
                # Tokens: identical except a counted near-tie of block sums (at most one row per
                # config, as in test_gpu.py's CUDA-vs-CPU comparisons); every rank identical.
                ok = ranks_agree and bad <= 1 and stat_err < 1e-5
                failures += 0 if ok else 1
                print(f"V {V} R {R} {name:7s}: ranks agree {ranks_agree}, tokens differing from "
                      f"the CPU oracle {bad} of {rows}, max stat rel err {stat_err:.2e} "
                      f"{'ok' if ok else 'FAIL'}", flush=True)
    flag = torch.tensor([failures], device=f"cuda:{dev}")
    dist.broadcast(flag, 0)
    dist.destroy_process_group()
    if rank == 0:
        print("torch_shard:", "SUCCESS" if int(flag.item()) == 0 else f"{int(flag.item())} FAILED")
    return 0 if int(flag.item()) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
