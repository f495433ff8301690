// Vocabulary-parallel sampling, host and device: the finish of one row (the winning token from
// the ranks' shares, the statistics, the probabilities of this rank's slice).
#ifndef DDS_KERNELS_SHARD_FINISH_ROW_H_
#define DDS_KERNELS_SHARD_FINISH_ROW_H_

#include "rule.h"

namespace dds {
namespace shard {

// ---------------------------------------------------------------------------------------------
// Finish.
// ---------------------------------------------------------------------------------------------
DDS_HD const Share& share_of(const Call& c, bool kept, int32_t rank, int32_t row) {
  if (kept) return reinterpret_cast<const KeptRec*>(rec(c, c.kept_round, rank, row))->share;
  return stats_of(c, rank, row).share;
}

// Combines the shares of all ranks into the winning token.
DDS_HD Winner combine_shares(const Call& c, const Row& w, bool kept, double M) {
  int32_t best_block = -1;
  double best_score = neg_inf_d();
  Winner best = no_winner();
  for (int32_t o = 0; o < w.nranks; ++o) {
    const Share& sh = share_of(c, kept, w.order[o], w.i);
    const BlockPart* parts[3] = {&sh.full, &sh.cut[0], &sh.cut[1]};
    for (int e = 0; e < 3; ++e) {
      const BlockPart& p = *parts[e];
      if (p.block < 0) continue;
      double score;
      Winner win = p.win;
      if (e == 0) {
        score = p.value;
      } else {
        // A cut block: the first rank (in offset order) holding a part of it sums all parts.
        bool seen = false;
        for (int32_t o2 = 0; o2 < o && !seen; ++o2) {
          const Share& s2 = share_of(c, kept, w.order[o2], w.i);
          seen = s2.cut[0].block == p.block || s2.cut[1].block == p.block;
        }
        if (seen) continue;
        double s = 0;
        for (int32_t o2 = o; o2 < w.nranks; ++o2) {
          const Share& s2 = share_of(c, kept, w.order[o2], w.i);
          const double f = s2.m_ref == M ? 1.0 : dexp(s2.m_ref - M);
          for (int e2 = 0; e2 < 2; ++e2) {
            if (s2.cut[e2].block != p.block) continue;
            s += s2.cut[e2].value * f;
            if (win_before(s2.cut[e2].win, win)) win = s2.cut[e2].win;
          }
        }
        score = M + dlog(s) + gumbel(w.q.seed, w.q.step, w.pos, (uint32_t)p.block, kSaltBlock);
      }
      if (best_block < 0 || score > best_score || (score == best_score && p.block < best_block)) {
        best_block = p.block;
        best_score = score;
        best = win;
      }
    }
  }
  return best;
}

// What the probs of a row need after finish_core.
struct FinishState {
  bool empty;     // K0 empty: zero probs
  bool onehot;    // processed stats of a greedy row: one-hot of the token
  bool guided;    // guided stats: softmax(l) over K0
  int32_t token;
  double M, logS;
  KRule k;        // the filtered set (processed stats of filtered rows; radix resolved)
};

// Writes row w's scalar outputs (tokens, argmax, logprobs, confidence, margin, entropy) from the
// gathered records; the radix threshold (if any) from `bins`. Returns what the probs need.
template <class Bins, class MergeSource>
DDS_HD FinishState finish_core(const Call& c, const Row& w, const Global& g, const Bins& bins,
                               MergeSource* ms) {
  const Args& a = c.a;
  const int32_t i = w.i;
  const Params& q = w.q;
  FinishState f;
  memset(&f, 0, sizeof f);
  f.k = rule_k0();
  if (g.n0 == 0) {
    f.empty = true;
    a.out.write_empty(i);
    return f;
  }
  const int32_t amax = g.l_id[0];
  KRule k = k_rule_base_t(c, w, g, ms);
  k_rule_radix(c, w, g, bins, &k);
  int32_t token;
  Winner win = no_winner();
  if (q.greedy) {
    token = amax;
  } else {
    win = combine_shares(c, w, k.filtered, g.Ma);
    token = win.id;
  }
  // docs/sampling.md §5.
  double logprob = 0, conf = 1, margin = 1, ent = 0, M = 0, logS = 0;
  const bool guided = a.stats == kStatsGuided;
  const bool onehot = !guided && q.greedy;
  if (!onehot) {
    double Z, W, x_tok, x2;
    int64_t count;
    if (guided) {
      M = g.Ml;
      Z = g.Zl;
      W = g.Wl;
      count = g.n0;
      x_tok = q.greedy ? (double)g.l_val[0] : (double)win.l;
      x2 = g.l_val[1];
    } else {
      M = g.Ma;
      if (k.filtered) {
        Z = 0;
        W = 0;
        count = 0;
        for (int32_t o = 0; o < w.nranks; ++o) {
          const KeptRec& kr = *reinterpret_cast<const KeptRec*>(rec(c, c.kept_round, w.order[o], i));
          Z += kr.z;
          W += kr.w;
          count += kr.count;
        }
      } else {
        Z = g.Za;
        W = g.Wa;
        count = g.n0;
      }
      x_tok = win.a;
      x2 = g.a_val[1];
    }
    logS = dlog(Z);
    logprob = (x_tok - M) - logS;
    conf = dexp(-logS);
    const double p2 = count >= 2 ? dexp((x2 - M) - logS) : 0.0;
    margin = conf - p2;
    ent = logS - W / Z;
    if (ent < 0) ent = 0;
  }
  a.out.write(i, token, amax, logprob, conf, margin, ent);
  f.onehot = onehot;
  f.guided = guided;
  f.token = token;
  f.M = M;
  f.logS = logS;
  f.k = (!guided && k.filtered) ? k : rule_k0();  // the support: K0 (guided, unfiltered) or K
  return f;
}

// probs of column t (local) of row w; f.k localized (localize()) when it is the radix rule.
DDS_HD float finish_prob_col(const FinishState& f, const Col& col, int32_t id) {
  if (f.empty) return 0.f;
  if (f.onehot) return id == f.token ? 1.f : 0.f;
  return in_rule(f.k, col, id) ? (float)dexp(((double)(f.guided ? col.l : col.x) - f.M) - f.logS)
                               : 0.f;
}
DDS_HD float finish_prob(const Call& c, const Row& w, const FinishState& f, int32_t t) {
  if (f.empty || f.onehot) return finish_prob_col(f, Col(), c.off + t);
  return finish_prob_col(f, column(c, w, t), c.off + t);
}

// Writes row i's outputs; returns the row's kReqEmptyRow bit (request flags are the
// caller's: they are per request).
DDS_HD int32_t finish_row(const Call& c, int32_t i) {
  const Args& a = c.a;
  Row w;
  make_row(c, i, true, &w);
  const Global g = global_stats(c, w);
  const GatheredBins bins{&c, &w};
  GatheredMerge ms{&c, &w, {}};
  FinishState f = finish_core(c, w, g, bins, &ms);
  if (a.out.probs) {
    localize(c, w, &f.k);
    const int64_t base = (int64_t)i * a.out.probs_row_stride;
    for (int32_t t = 0; t < c.Vs; ++t) store_elt(a.out.probs, a.out.probs_dtype, base + t, finish_prob(c, w, f, t));
  }
  return f.empty ? kReqEmptyRow : 0;
}

}  // namespace shard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_FINISH_ROW_H_
