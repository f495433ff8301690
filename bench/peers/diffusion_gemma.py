#!/usr/bin/env python3
"""dds.vllm against vLLM's own DiffusionGemma sampler code, on one GPU, in one run.

vLLM's side is its own files, taken from the vllm==0.33.0 wheel into the ignored folder .vllm/ by
scripts/prep-peers.sh (nothing of vLLM is committed or installed):
- vllm/model_executor/models/diffusion_gemma_sampler.py: ``sample_row_stats`` (one Triton pass:
  argmax, Gumbel-max sample, entropy, softmax in the model dtype);
- vllm/v1/worker/gpu/sample/logprob.py: ``compute_topk_scores`` (torch.topk + Triton log-softmax
  and rank kernels), which DiffusionGemma's sampler calls per converged request on the tempered
  fp32 copy of the tile (``diffusion_gemma.py``, DiffusionSampler.__call__): that loop,
  rewritten here around vLLM's function, is the stash peer.
The few configuration modules those files import are stand-ins (bench/peers/vllm_peers.py, plus
vllm.sampling_params / vllm.v1.outputs / vllm.v1.worker.gpu.buffer_utils here).

Checks (DiffusionGemma shapes: V = 262144, canvas 256, bf16 logits, probs bf16 or none):
- argmax equal; entropy within 1e-5 relative (1e-6 absolute near 0); probs within the dtype's
  rounding (2 bf16 ulps, or both below 2^-126); greedy (T = 0) rows: sample == argmax;
- samples: chi-square of each sampler against the exact softmax on a small case
  (V = 64, 65536 draws);
- stash: token ids and ranks identical (top-k entries compared in (value desc, id asc) order:
  torch.topk does not order ties), logprobs within 1e-4 absolute.
Times: CUDA graph replay of each call (median of 20 replays, CUDA events), and for the stash
also vLLM's path as it runs (eager, with its host syncs) against dds.vllm captured.

Usage, on the GPU machine (torch, triton; the dds package installed with CUDA):
    python3 bench/peers/diffusion_gemma.py [--out FILE.md] [--quick]
Exit status 1 if a check fails.
"""
import argparse
import datetime
import importlib
import math
import os
import statistics
import sys
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vllm_peers  # noqa: E402

import dds  # noqa: E402
from dds import vllm as ddsv  # noqa: E402

V, CL = 262144, 256
DEV = "cuda"  # --smoke: "cpu" (Triton's interpreter), small V and canvas, no timing
ROW_STATS = "vllm/model_executor/models/diffusion_gemma_sampler.py"
LOGPROB = "vllm/v1/worker/gpu/sample/logprob.py"


# -- vLLM's files ---------------------------------------------------------------------------------
class _Logprobs:
    """Stand-in for vllm.v1.outputs.LogprobsTensors (a named tuple of tensors)."""

    def __init__(self, logprob_token_ids, logprobs, selected_token_ranks, **_):
        self.logprob_token_ids = logprob_token_ids
        self.logprobs = logprobs
        self.selected_token_ranks = selected_token_ranks


def _extra_stubs():
    m = vllm_peers._module
    m("vllm.sampling_params", MAX_LOGPROB_TOKEN_IDS=128, SamplingParams=object)
    m("vllm.v1.outputs", LogprobsTensors=_Logprobs)
    m("vllm.v1.worker.gpu.buffer_utils", StagedWriteTensor=object, UvaBackedTensor=object)


def load_vllm():
    """(sample_row_stats, compute_topk_scores, version) from the newest .vllm/ tree with both."""
    why = []
    for ver, tree in vllm_peers._trees():
        if not all(os.path.exists(os.path.join(tree, f)) for f in (ROW_STATS, LOGPROB)):
            why.append(f"vllm {ver}: files missing")
            continue
        try:
            vllm_peers._stubs(tree)
            _extra_stubs()
            rs = importlib.import_module("vllm.model_executor.models.diffusion_gemma_sampler")
            lp = importlib.import_module("vllm.v1.worker.gpu.sample.logprob")
            return rs.sample_row_stats, lp.compute_topk_scores, ver
        except Exception as e:  # Triton / API drift
            why.append(f"vllm {ver}: {type(e).__name__}: {str(e)[:200]}")
    raise SystemExit("vLLM's DiffusionGemma files not loadable (run scripts/prep-peers.sh and "
                     "carry .vllm/): " + "; ".join(why) if why else "no .vllm/ trees")


def vllm_stash(compute_topk_scores, tile, temps, cl, src, slots, keep, valid, num_topk,
               ids_state, S, width, logits_mode):
    """DiffusionGemma's stash (DiffusionSampler.__call__) around vLLM's compute_topk_scores,
    assembled into [S, cl, 1 + width] like dds.vllm.stash_converged_logprobs."""
    n = tile.shape[0] // cl
    scaled = tile.float().view(n, cl, -1) / temps[:n, None, None].clamp(min=1e-10)
    flat = scaled.reshape(-1, scaled.shape[-1])
    argmax = scaled.argmax(dim=-1)
    out_ids = torch.zeros(S, cl, 1 + width, dtype=torch.int64, device=tile.device)
    out_lp = torch.full((S, cl, 1 + width), float("-inf"), device=tile.device)
    out_rk = torch.zeros(S, cl, dtype=torch.int64, device=tile.device)
    max_ids = int(ids_state.num_token_ids.np.max()) if ids_state is not None else 0
    for j in keep.nonzero(as_tuple=True)[0].tolist():
        li, slot, k = int(src[j]), int(slots[j]), int(valid[j])
        pos = li * cl
        per_req = max_ids > 0
        r = compute_topk_scores(
            flat[pos:pos + k], num_topk, argmax[li][:k],
            logprob_token_ids_state=ids_state if per_req else None,
            expanded_idx_mapping=(torch.full((k,), j, dtype=torch.int32, device=tile.device)
                                  if per_req else None),
            max_per_req_token_ids=max_ids, logits_mode=logits_mode)
        w = r.logprob_token_ids.shape[1]
        out_ids[slot, :k, :w] = r.logprob_token_ids
        out_lp[slot, :k, :w] = r.logprobs
        out_rk[slot, :k] = r.selected_token_ranks
    return out_ids, out_lp, out_rk


class _IdsState:
    """Stand-in for vLLM's LogprobTokenIdsState: per request (here: per j) ids on the GPU."""

    def __init__(self, num_ids, ids):
        self.num_token_ids = types.SimpleNamespace(np=num_ids.cpu().numpy(),
                                                   gpu=num_ids.to(torch.int32))
        self.token_ids = types.SimpleNamespace(gpu=ids.to(torch.int32).contiguous())


# -- timing ---------------------------------------------------------------------------------------
def graph_time(fn, reps=20):
    """Median ms of one CUDA graph replay of fn() (warmed up eagerly, captured once)."""
    if DEV == "cpu":
        return float("nan")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return event_time(g.replay, reps)


def event_time(fn, reps=20):
    if DEV == "cpu":
        return float("nan")
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


# -- checks ---------------------------------------------------------------------------------------
FAILS = []


def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what, flush=True)
    if not ok:
        FAILS.append(what)


def make_logits(R, gen):
    """bf16 logits shaped like a DiffusionGemma tile: per row a few strong candidates over a
    Gaussian background (entropies from ~0 to several nats), with exact ties at the top."""
    x = torch.randn(R * CL, V, device=DEV, generator=gen) * 2.0
    peak = torch.rand(R * CL, 1, device=DEV, generator=gen) * 16.0
    top = torch.randint(0, V, (R * CL, 4), device=DEV, generator=gen)
    x.scatter_add_(1, top, peak.expand(-1, 4) * torch.tensor([1.0, 0.9, 0.8, 0.8], device=DEV))
    x = x.to(torch.bfloat16)
    # every 8th row: a second column equal to the maximum (exact ties at the top: vLLM's rank
    # counts them, T = 0 takes the lower id, the entropy at T = 0 is log 2)
    m = x[::8].max(dim=-1, keepdim=True).values
    x[::8].scatter_(1, (top[::8, :1] + 1) % V, m)
    return x


def compare_row_stats(vfn, R, gen):
    x = make_logits(R, gen)
    temps = torch.linspace(0.2, 1.0, R, device=DEV)
    if R >= 4:
        temps[1] = 0.0
    res = {}
    for pd in (torch.bfloat16, None):
        am_v, s_v, e_v, p_v = vfn(x, temps, CL, 1234, pd)
        am_d, s_d, e_d, p_d = ddsv.sample_row_stats(x, temps, CL, 1234, pd)
        tag = f"R={R} probs={'bf16' if pd else 'none'}"
        check(torch.equal(am_v, am_d), f"{tag}: argmax equal ({int((am_v != am_d).sum())} differ)")
        rel = ((e_d - e_v).abs() / e_v.abs().clamp(min=0.1)).max().item()
        check(bool(((e_d - e_v).abs() <= 1e-5 * e_v.abs() + 1e-6).all()),
              f"{tag}: entropy within 1e-5 rel / 1e-6 abs (max |diff| / max(|H|, 0.1) = {rel:.2e})")
        greedy = (temps[:R] <= 0).repeat_interleave(CL)
        check(bool((s_d[greedy] == am_d[greedy]).all() and (s_v[greedy] == am_v[greedy]).all()),
              f"{tag}: T=0 rows sample the argmax (both)")
        if pd is not None:
            a, b = p_d.float(), p_v.float()
            ulp = 2.0 ** -7 * torch.maximum(a.abs(), b.abs())
            # 2 ulps, or a subnormal (vLLM's fp32 exp keeps some below 2^-126, dds flushes)
            bad = int(((a - b).abs() > 2 * ulp + 2.0 ** -126).sum())
            check(bad == 0, f"{tag}: probs within 2 bf16 ulps ({bad} elements outside)")
        res[pd] = (graph_time(lambda: vfn(x, temps, CL, 1234, pd)),
                   graph_time(lambda: ddsv.sample_row_stats(x, temps, CL, 1234, pd)))
    del x
    return res


def chi_square(vfn):
    v, cl, R = 64, 256, (256 if DEV == "cuda" else 16)
    row = torch.linspace(-2.0, 1.5, v, device=DEV)
    x = row.expand(R * cl, v).contiguous()
    temps = torch.full((R,), 0.7, device=DEV)
    p = torch.softmax(row.double() / 0.7, dim=0)
    n = R * cl
    crit = (v - 1) * (1 - 2 / (9 * (v - 1)) + 3.719 * math.sqrt(2 / (9 * (v - 1)))) ** 3
    for name, fn in (("vLLM", vfn), ("dds.vllm", ddsv.sample_row_stats)):
        _, s, _, _ = fn(x, temps, cl, 99, None)
        c = torch.bincount(s, minlength=v).double()
        chi2 = float(((c - n * p) ** 2 / (n * p)).sum())
        check(chi2 < crit, f"chi-square {name}: {chi2:.1f} < {crit:.1f} (df {v - 1}, p = 1e-4, "
                           f"{n} draws)")


def canonical(ids, lp, width, topk_rows):
    """Entries 1.. of rows listing top-k tokens sorted by (value desc, id asc)."""
    ids, lp = ids.clone(), lp.clone()
    body_i, body_l = ids[..., 1:], lp[..., 1:]
    o = torch.argsort(body_i, dim=-1, stable=True)                 # id asc, then
    si, sl = body_i.gather(-1, o), body_l.gather(-1, o)
    o = torch.argsort(sl, dim=-1, descending=True, stable=True)   # value desc (stable)
    si, sl = si.gather(-1, o), sl.gather(-1, o)
    m = topk_rows[..., None].expand_as(body_i)
    ids[..., 1:] = torch.where(m, si, body_i)
    lp[..., 1:] = torch.where(m, sl, body_l)
    return ids, lp


def compare_stash(cfn, R, gen, with_ids):
    x = make_logits(R, gen)
    temps = torch.linspace(0.3, 1.0, R, device=DEV)
    src = torch.arange(R, device=DEV)
    slots = torch.arange(R, device=DEV).flip(0)
    keep = (torch.arange(R, device=DEV) % 2 == 0) | (R == 1)
    valid = torch.full((R,), CL, device=DEV)
    valid[::3] = CL - CL // 4
    num_topk = 20
    if with_ids:
        nids = torch.zeros(R, dtype=torch.int64, device=DEV)
        nids[::2] = 5
        tids = torch.randint(0, V, (R, 5), device=DEV, generator=gen)
        width = max(num_topk, 5)
        state = _IdsState(nids, tids)
    else:
        nids = tids = state = None
        width = num_topk
    tag = f"stash R={R} {'token_ids' if with_ids else 'top-20'}"
    vi, vl, vr = vllm_stash(cfn, x, temps, CL, src, slots, keep, valid, num_topk, state, R,
                            width, False)
    di = torch.zeros(R, CL, 1 + width, dtype=torch.int64, device=DEV)
    dl = torch.full((R, CL, 1 + width), float("-inf"), device=DEV)
    dr = torch.zeros(R, CL, dtype=torch.int64, device=DEV)
    ddsv.stash_converged_logprobs(x, CL, src, slots, keep, valid, temps, num_topk, nids, tids,
                                  di, dl, dr, False)
    # rows that list top-k tokens: written rows of requests without ids
    rows_ok = torch.zeros(R, CL, dtype=torch.bool, device=DEV)
    for j in keep.nonzero(as_tuple=True)[0].tolist():
        if nids is None or int(nids[j]) == 0:
            rows_ok[int(slots[j]), :int(valid[j])] = True
    ci, cvl = canonical(vi, vl, width, rows_ok)
    cd, cdl = canonical(di, dl, width, rows_ok)
    # a top-k entry tied with the k-th value may legitimately be another tied token
    kth = cvl[..., num_topk:num_topk + 1]
    boundary = (cvl == kth) & rows_ok[..., None]
    same = (ci == cd) | boundary
    check(bool(same.all()), f"{tag}: token ids identical ({int((~same).sum())} differ, "
                            f"{int(boundary.sum())} boundary-tied entries excused)")
    check(torch.equal(vr, dr), f"{tag}: ranks identical ({int((vr != dr).sum())} differ; "
                               f"{int((vr > 1).sum())} rows with tied maxima)")
    fin = torch.isfinite(cvl)
    check(torch.equal(fin, torch.isfinite(cdl)), f"{tag}: same padding")
    d = (cvl[fin] - cdl[fin]).abs().max().item() if bool(fin.any()) else 0.0
    check(d <= 1e-4, f"{tag}: logprobs within 1e-4 abs (max {d:.2e})")
    t_v = event_time(lambda: vllm_stash(cfn, x, temps, CL, src, slots, keep, valid, num_topk,
                                        state, R, width, False), reps=5)
    t_d = graph_time(lambda: ddsv.stash_converged_logprobs(
        x, CL, src, slots, keep, valid, temps, num_topk, nids, tids, di, dl, dr, False))
    del x
    return t_v, t_d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None, help="markdown file for the table")
    ap.add_argument("--quick", action="store_true", help="R in {1, 16} only")
    ap.add_argument("--smoke", action="store_true",
                    help="check the script itself without a GPU: CPU tensors, V = 4096, canvas "
                         "16, vLLM's Triton kernels in Triton's interpreter (set "
                         "TRITON_INTERPRET=1), no timing")
    a = ap.parse_args()
    global V, CL, DEV
    if a.smoke:
        V, CL, DEV = 4096, 16, "cpu"
    vfn, cfn, ver = load_vllm()
    gpu = torch.cuda.get_device_name(0) if DEV == "cuda" else "CPU smoke run"
    print(f"vLLM {ver} files, dds {dds.__version__}, torch {torch.__version__}, {gpu}", flush=True)
    gen = torch.Generator(device=DEV).manual_seed(0)
    Rs = [1, 4] if a.smoke else [1, 16] if a.quick else [1, 4, 16, 64]
    chi_square(vfn)
    rows = []
    for R in Rs:
        print(f"R = {R} ({R * CL} rows x {V})", flush=True)
        t = compare_row_stats(vfn, R, gen)
        if DEV == "cuda":
            torch.cuda.empty_cache()
        st = compare_stash(cfn, R, gen, with_ids=False)
        if R in (4, 16):
            compare_stash(cfn, R, gen, with_ids=True)
        if DEV == "cuda":
            torch.cuda.empty_cache()
        rows.append((R, t, st))
    lines = [f"DiffusionGemma sampler step, V = {V}, canvas {CL}, bf16 logits, {gpu}, vLLM {ver}, "
             f"dds {dds.__version__}, torch {torch.__version__}, "
             f"{datetime.date.today().isoformat()}. ms per call (CUDA graph replay, median of 20;"
             f" vLLM's stash path eager with its host syncs, median of 5); stash: every other "
             f"request converged, top-20.", "",
             "| requests | rows | row stats, probs bf16: vLLM | dds | speed-up | "
             "row stats, no probs: vLLM | dds | speed-up | stash: vLLM | dds | speed-up |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for R, t, (sv, sd) in rows:
        pv, pdd = t[torch.bfloat16]
        nv, nd = t[None]
        lines.append(f"| {R} | {R * CL} | {pv:.3f} | {pdd:.3f} | {pv / pdd:.2f}x | {nv:.3f} | "
                     f"{nd:.3f} | {nv / nd:.2f}x | {sv:.3f} | {sd:.3f} | {sv / sd:.2f}x |")
    lines += ["", f"checks failed: {len(FAILS)}" + ("" if not FAILS else ": " + "; ".join(FAILS))]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
