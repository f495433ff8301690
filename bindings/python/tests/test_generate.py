"""dds.generate on the CPU backend: the Fugue-style loop on a tiny context-dependent model whose
exact joint distribution of completions is enumerated here (one token per call in random order,
EOS cutting the order, blocks). Self-speculative decoding (draft_tokens 2, 4) and the
one-token-per-call path must match it by chi-square; revealing everything at once must not.

CI runs 1e4 completions per case; `python tests/test_generate.py --completions 100000` runs
the same cases at 1e5 and prints the chi-square table, tokens per call and times.
"""

import argparse
import functools
import math
import sys
import time

import numpy as np
import pytest

import dds
import reference as ref

V, EOS, MASK = 6, 4, 5  # tokens 0..3, EOS, MASK


@functools.lru_cache(maxsize=None)
def model_weights(L):
    rng = np.random.default_rng(2024)
    W0 = (1.2 * rng.standard_normal((L, V))).astype(np.float32)
    W0[:, EOS] -= 0.5
    A = (1.5 * rng.standard_normal((2 * L - 1, V, V))).astype(np.float32)
    return W0, A


def tiny_model(tokens):
    """logits[n, p] = W0[p] + sum_{j != p} A[j - p][tokens[n, j]]: every position sees every
    other one (masks included), so a wrong conditioning changes the distribution."""
    tokens = np.asarray(tokens)
    N, L = tokens.shape
    W0, A = model_weights(L)
    out = np.repeat(W0[None], N, axis=0)
    for p in range(L):
        for j in range(L):
            if j != p:
                out[:, p] += A[j - p + L - 1][tokens[:, j]]
    return out


def processed(logits, temperature, top_k):
    x = np.asarray(logits, np.float64).copy()
    x[MASK] = -np.inf
    if temperature == 0:
        p = np.zeros(V)
        p[int(np.argmax(x))] = 1.0
        return p
    x = x / np.float32(temperature)
    if 0 < top_k < V - 1:
        keep = np.lexsort((np.arange(V), -x))[:top_k]
        y = np.full(V, -np.inf)
        y[keep] = x[keep]
        x = y
    p = np.exp(x - x.max())
    return p / p.sum()


def normalise(gen):
    gen = list(gen)
    if EOS in gen:
        e = gen.index(EOS)
        gen = gen[:e + 1] + [EOS] * (len(gen) - e - 1)
    return tuple(gen)


def exact_distribution(prompt, G, block, temperature=1.0, top_k=0):
    """{completion: probability} of one token per call in uniformly random order (positions
    masked, before the first EOS, in the first block that has such positions)."""
    P = len(prompt)
    out = {}

    @functools.lru_cache(maxsize=None)
    def walk(gen):
        el = [i for i in range(G) if gen[i] == MASK and EOS not in gen[:i]]
        if not el:
            return {normalise(gen): 1.0}
        b = el[0] // block
        el = [i for i in el if i // block == b]
        logits = tiny_model(np.array([list(prompt) + list(gen)]))[0]
        res = {}
        for i in el:
            p = processed(logits[P + i], temperature, top_k)
            for t in np.nonzero(p)[0]:
                nxt = gen[:i] + (int(t),) + gen[i + 1:]
                for k, q in walk(nxt).items():
                    res[k] = res.get(k, 0.0) + q * p[t] / len(el)
        return res

    out = walk((MASK,) * G)
    assert abs(sum(out.values()) - 1) < 1e-9
    return out


def chi_square(result, P, exact):
    """Chi-square of completions against the exact distribution (cells with expected count
    < 5 pooled)."""
    gens = result.tokens[:, P:]
    keys = sorted(exact)
    index = {k: i for i, k in enumerate(keys)}
    counts = np.zeros(len(keys))
    for row in map(tuple, gens.tolist()):
        assert row in index, f"completion {row} has probability 0"
        counts[index[row]] += 1
    probs = np.array([exact[k] for k in keys])
    n = counts.sum()
    small = probs * n < 5
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        probs = np.append(probs[~small], probs[small].sum())
    return ref.chi2_test(counts, probs)


CASES = {  # name: prompt, gen_length, block_length, kwargs
    "one-block": ([0], 3, None, {}),
    "blocks": ([1, 2], 4, 2, {}),
    "filters": ([0], 3, None, dict(temperature=0.8, top_k=3)),
}


def run_case(case, draft_tokens, completions, steps_per_block=None):
    prompt, G, block, kw = CASES[case]
    P = len(prompt)
    B = completions
    with dds.Sampler(V, max_rows=B * max(G, draft_tokens + 1), max_requests=B) as s:
        t0 = time.perf_counter()
        res = dds.generate(tiny_model, np.tile(np.array(prompt), (B, 1)), sampler=s,
                           gen_length=G, mask_token=MASK, block_length=block,
                           steps_per_block=steps_per_block, draft_tokens=draft_tokens,
                           eos_token=EOS, seed=77 + 1000003 * draft_tokens, **kw)
        dt = time.perf_counter() - t0
    exact = exact_distribution(tuple(prompt), G, block or G, kw.get("temperature", 1.0),
                               kw.get("top_k", 0))
    stat, df, pval = chi_square(res, P, exact)
    return res, stat, df, pval, dt


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("draft_tokens", [0, 2, 4])
def test_joint_distribution_matches_one_token_per_call(case, draft_tokens):
    res, stat, df, pval, dt = run_case(case, draft_tokens, 10_000)
    print(f"\n{case} draft_tokens={draft_tokens}: chi-square {stat:.2f}, df {df}, p = {pval:.3g}, "
          f"tokens/call {res.tokens_per_call:.3f}, {res.num_calls} calls, {dt:.2f} s")
    assert pval > 1e-4, (stat, df, pval)
    assert not np.any(res.tokens == MASK)
    if draft_tokens == 0:
        assert res.tokens_per_call == 1.0
    else:
        assert res.tokens_per_call > 1.0


def test_chi_square_has_power():
    """Revealing the whole block in one call (parallel decoding) is a different distribution:
    the same statistic rejects it."""
    res, stat, df, pval, _ = run_case("one-block", 0, 10_000, steps_per_block=1)
    assert res.num_calls == 1
    assert pval < 1e-6, (stat, df, pval)


def test_confidence_order_and_eos():
    prompt = np.zeros((3, 2), np.int64)
    with dds.Sampler(V, max_rows=64) as s:
        r = dds.generate(tiny_model, prompt, sampler=s, gen_length=6, mask_token=MASK,
                         order="confidence", threshold=0.0, eos_token=EOS, seed=1)
        assert r.num_calls == 1 and np.all(r.calls == 1)  # everything clears 0: one call
        r2 = dds.generate(tiny_model, prompt, sampler=s, gen_length=6, mask_token=MASK,
                          block_length=3, order="confidence", steps_per_block=2, seed=1)
        assert np.all(r2.calls == 4) and np.all(r2.revealed == 6)  # 2 + 1 per block, 2 blocks
        r3 = dds.generate(tiny_model, prompt, sampler=s, gen_length=6, mask_token=MASK,
                          order="confidence", threshold=1.01, temperature=0.0, eos_token=EOS,
                          seed=1)
        assert np.all(r3.calls == r3.revealed)  # nothing clears: the most confident one per call
        # greedy confidence decoding is deterministic: the same canvas for every request
        assert np.all(r3.tokens == r3.tokens[0])
        for res in (r, r2, r3):
            assert not np.any(res.tokens == MASK)
        for res in (r, r3):
            for row in res.tokens[:, 2:].tolist():
                assert tuple(row) == normalise(row)  # after the first EOS: EOS


def test_bad_arguments():
    p = np.zeros((1, 1), np.int64)
    with dds.Sampler(V) as s:
        with pytest.raises(ValueError, match="order"):
            dds.generate(tiny_model, p, sampler=s, gen_length=2, mask_token=MASK, order="ltr")
        with pytest.raises(ValueError, match="draft_tokens"):
            dds.generate(tiny_model, p, sampler=s, gen_length=2, mask_token=MASK,
                         order="confidence", draft_tokens=2)
        with pytest.raises(ValueError, match="mask_token"):
            dds.generate(tiny_model, p, sampler=s, gen_length=2, mask_token=V)
        with pytest.raises(ValueError, match="seed"):
            dds.generate(tiny_model, p, sampler=s, gen_length=2, mask_token=MASK, seed=[1, 2])
        with pytest.raises(ValueError, match="prompt"):
            dds.generate(tiny_model, np.zeros(3, np.int64), sampler=s, gen_length=2,
                         mask_token=MASK)


def main():
    ap = argparse.ArgumentParser(description="the joint-distribution cases at a chosen size")
    ap.add_argument("--completions", type=int, default=100_000)
    args = ap.parse_args()
    print(f"{'case':10s} {'drafts':>6s} {'chi2':>8s} {'df':>4s} {'p':>9s} {'tok/call':>8s} "
          f"{'calls':>6s} {'time':>7s}")
    for case in sorted(CASES):
        for n in (0, 2, 4):
            res, stat, df, pval, dt = run_case(case, n, args.completions)
            print(f"{case:10s} {n:6d} {stat:8.2f} {df:4d} {pval:9.3g} "
                  f"{res.tokens_per_call:8.3f} {res.num_calls:6d} {dt:6.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
