// Vocabulary-parallel sampling, host and device: the global round-0 statistics of a row, the
// merge of the ranks' top-k candidates, the radix walk of top-p, the filtered set of a row
// (k_rule), and rounds RADIX and KEPT of one row.
#ifndef DDS_KERNELS_SHARD_RULE_H_
#define DDS_KERNELS_SHARD_RULE_H_

#include "row.h"

namespace dds {
namespace shard {

// ---------------------------------------------------------------------------------------------
// Global round-0 statistics and the filtered set of a row.
// ---------------------------------------------------------------------------------------------
struct Global {
  int32_t n0;
  int32_t l_id[2];
  float l_val[2];
  int32_t a_id[2];
  float a_val[2];
  double Zl, Wl, Za, Wa;
  double Ml, Ma;
};

DDS_HD Global global_stats(const Call& c, const Row& w) {
  Global g;
  memset(&g, 0, sizeof g);
  g.l_id[0] = g.l_id[1] = g.a_id[0] = g.a_id[1] = -1;
  for (int32_t o = 0; o < w.nranks; ++o) {
    const StatsHead& h = stats_of(c, w.order[o], w.i);
    g.n0 += h.n0;
    for (int e = 0; e < 2; ++e) {
      merge_top2(g.l_id, g.l_val, h.top_l_id[e], h.top_l[e]);
      merge_top2(g.a_id, g.a_val, h.top_a_id[e], h.top_a[e]);
    }
  }
  if (g.n0 == 0) return g;
  g.Ml = g.l_val[0];
  g.Ma = g.a_val[0];
  for (int32_t o = 0; o < w.nranks; ++o) {
    const StatsHead& h = stats_of(c, w.order[o], w.i);
    if (h.n0 == 0) continue;
    const double dl = (double)h.top_l[0] - g.Ml, da = (double)h.top_a[0] - g.Ma;
    const double fl = dexp(dl), fa = dexp(da);
    g.Zl += h.zl * fl;
    g.Wl += fl * (h.wl + dl * h.zl);
    g.Za += h.za * fa;
    g.Wa += fa * (h.wa + da * h.za);
  }
  return g;
}

// k-way merge of the ranks' sorted candidate lists: the n-th (0-based) candidate overall.
struct Merge {
  int32_t pos[kMaxWorld];
};
DDS_HD bool merge_next(const Call& c, const Row& w, Merge* m, Cand* out) {
  int32_t best = -1;
  Cand bc;
  bc.a = 0;
  bc.id = 0;
  for (int32_t o = 0; o < w.nranks; ++o) {
    const int32_t r = w.order[o];
    int32_t n = stats_of(c, r, w.i).n_cand;
    n = n < 0 ? 0 : (n > c.C ? c.C : n);  // untrusted buffer
    if (m->pos[o] >= n) continue;
    const Cand x = cands_of(c, r, w.i)[m->pos[o]];
    if (best < 0 || before(x.a, x.id, bc.a, bc.id)) {
      best = o;
      bc = x;
    }
  }
  if (best < 0) return false;
  ++m->pos[best];
  *out = bc;
  return true;
}
// The merged candidates in order, from the gathered records (reset() restarts). The CUDA kernels
// use an equivalent source over the merged list pre-built in shared memory.
struct GatheredMerge {
  const Call* c;
  const Row* w;
  Merge m;
  DDS_HD void reset() { memset(&m, 0, sizeof m); }
  DDS_HD bool next(Cand* out) { return merge_next(*c, *w, &m, out); }
};

// Radix-select state after the first `rounds_done` radix rounds.
struct RadixState {
  uint32_t prefix;
  double cum;      // mass of the tokens before the prefix's subtree, in order
  int64_t above;   // their count
  bool keep_all;
  int64_t final_count;  // count in the prefix's bin at the last level walked
};

// The gathered radix bins of a row, summed over the ranks in offset order (count, then mass).
// Bins::get(d, b, &cnt, &mass) gives bin b of radix round d (0-based). GatheredBins reads the
// gathered records directly (CPU; any caller); the CUDA kernels pre-sum them into shared memory
// in the same order (bit-identical sums).
struct GatheredBins {
  const Call* c;
  const Row* w;
  DDS_HD void get(int d, int b, int64_t* cnt_out, double* mass_out) const {
    int64_t cnt = 0;
    double mass = 0;
    for (int32_t o = 0; o < w->nranks; ++o) {
      const RadixRec& rr =
          *reinterpret_cast<const RadixRec*>(rec(*c, c->first_radix + d, w->order[o], w->i));
      cnt += rr.count[b];
      mass += rr.mass[b];
    }
    *cnt_out = cnt;
    *mass_out = mass;
  }
};

// Z1 of top-p without top-k: the global sum of exp(a - M_a) over K0, as the sum of the bins of the
// first radix round (bins from the top, each summed over the ranks in offset order). Summed from
// the same float64 terms as the walk's running mass (not from round 0's sums), so that the cut is
// decided in one precision on every backend.
template <class Bins>
DDS_HD double radix_z1(const Bins& bins) {
  double z = 0;
  for (int b = kBins - 1; b >= 0; --b) {
    int64_t cnt;
    double mass;
    bins.get(0, b, &cnt, &mass);
    if (cnt) z += mass;
  }
  return z;
}

template <class Bins>
DDS_HD RadixState radix_walk(const Bins& bins, double target, int rounds_done) {
  RadixState s;
  s.prefix = 0;
  s.cum = 0;
  s.above = 0;
  s.keep_all = false;
  s.final_count = 0;
  for (int d = 0; d < rounds_done; ++d) {
    int found = -1, last = -1;
    double cum = s.cum, cum_last = s.cum;
    int64_t above = s.above, above_last = s.above, cnt_found = 0, cnt_last = 0;
    for (int b = kBins - 1; b >= 0; --b) {
      int64_t cnt = 0;
      double mass = 0;
      bins.get(d, b, &cnt, &mass);
      if (cnt == 0) continue;
      if (cum + mass >= target) {
        found = b;
        cnt_found = cnt;
        break;
      }
      last = b;
      cnt_last = cnt;
      cum_last = cum;
      above_last = above;
      cum += mass;
      above += cnt;
    }
    if (found < 0) {
      if (d == 0 || last < 0) {  // no crossing at all (rounding): keep every token
        s.keep_all = true;
        return s;
      }
      // The parent bin crossed but its children do not (the sums were grouped differently):
      // the cut is at the end of the subtree, so descend into its last non-empty bin.
      found = last;
      cnt_found = cnt_last;
      cum = cum_last;
      above = above_last;
    }
    s.prefix = (s.prefix << 8) | (uint32_t)found;
    s.cum = cum;
    s.above = above;
    s.final_count = cnt_found;
  }
  return s;
}

// The filtered set of row w, except the radix threshold of top-p without top-k (k.radix set, see
// k_rule_radix). ms: the merged candidates (MergeSource: reset(), next(Cand*)); NULL leaves the
// candidate threshold unresolved (k.cand set, no threshold: for callers that only need the kind).
template <class MergeSource>
DDS_HD KRule k_rule_base_t(const Call& c, const Row& w, const Global& g, MergeSource* ms) {
  KRule k = rule_k0();
  const Params& q = w.q;
  if (q.greedy || g.n0 == 0) return k;
  const bool use_k = q.k > 0 && q.k < g.n0;
  const bool use_p = q.p < 1.f;
  const bool use_mp = q.min_p > 0.f;
  if (!use_k && !use_p && !use_mp) return k;
  k.filtered = true;
  k.M = g.Ma;
  k.use_min_p = use_mp;
  k.min_p = (double)q.min_p;
  if ((use_k || use_p) && q.k > 0 && q.k <= c.C) {
    k.cand = true;
    if (!ms) return k;
    int64_t n1 = use_k ? q.k : g.n0;
    int64_t n2 = n1;
    ms->reset();
    Cand x, last;
    last.a = 0;
    last.id = -1;
    if (use_p) {  // docs/sampling.md §3 step 2, on the exact candidate values
      double Z1 = 0;
      int64_t n = 0;
      while (n < n1 && ms->next(&x)) {
        Z1 += dexp((double)x.a - g.Ma);
        ++n;
      }
      n1 = n;
      n2 = n1;
      const double target = (double)q.p * Z1;
      double S = 0;
      ms->reset();
      for (int64_t e = 0; e < n1; ++e) {
        ms->next(&x);
        if (e > 0 && !(S < target)) {
          n2 = e;
          break;
        }
        last = x;
        S += dexp((double)x.a - g.Ma);
      }
    } else {
      int64_t n = 0;
      while (n < n1 && ms->next(&x)) {
        last = x;
        ++n;
      }
      n2 = n;
    }
    k.has_thr = n2 > 0 && last.id >= 0;
    k.vkey = order_key(last.a);
    k.id_thr = last.id;
  } else if (use_p) {
    k.radix = true;
  }
  return k;
}
DDS_HD KRule k_rule_base(const Call& c, const Row& w, const Global& g) {
  GatheredMerge ms{&c, &w, {}};
  return k_rule_base_t(c, w, g, &ms);
}

// Resolves the radix threshold (rounds >= KEPT) from the gathered bins of all radix rounds.
template <class Bins>
DDS_HD void k_rule_radix(const Call& c, const Row& w, const Global& g, const Bins& bins, KRule* kp) {
  KRule& k = *kp;
  if (!k.radix || c.first_radix < 0) return;
  {
    const double target = (double)w.q.p * radix_z1(bins);
    const RadixState s = radix_walk(bins, target, kRadixRounds);
    if (!s.keep_all) {
      const double e = dexp((double)key_value(s.prefix) - g.Ma);
      double S = s.cum;
      int64_t j = s.final_count;
      for (int64_t jj = 1; jj <= s.final_count; ++jj) {
        S += e;
        if (S >= target) {
          j = jj;
          break;
        }
      }
      k.has_thr = true;
      k.vkey = s.prefix;
      k.tie_keep = j;
      k.id_thr = -1;  // set per rank by localize()
    }
  }
}

// The filtered set of row w. for_kept: also resolve the radix threshold (rounds >= KEPT).
DDS_HD KRule k_rule(const Call& c, const Row& w, const Global& g, bool for_kept) {
  KRule k = k_rule_base(c, w, g);
  if (for_kept) {
    GatheredBins bins{&c, &w};
    k_rule_radix(c, w, g, bins, &k);
  }
  return k;
}

// Radix path: turns the global count of kept ties into this rank's last kept id (the ties of the
// ranks with lower offsets come first), so the rule becomes stateless.
// localize_keep: how many of this rank's ties it keeps (<= 0: none), and (*mine) how many ties it
// has (its last-round count of the threshold key): keep >= mine keeps them all.
DDS_HD int64_t localize_keep(const Call& c, const Row& w, const KRule& k, int64_t* mine) {
  int64_t before_me = 0;
  const int32_t last = c.first_radix + kRadixRounds - 1;
  *mine = 0;
  for (int32_t o = 0; o < w.nranks; ++o) {
    const RadixRec& rr = *reinterpret_cast<const RadixRec*>(rec(c, last, w.order[o], w.i));
    if (w.order[o] == c.rank) {
      *mine = rr.count[k.vkey & 255u];
      break;
    }
    before_me += rr.count[k.vkey & 255u];
  }
  return k.tie_keep - before_me;
}
DDS_HD void localize(const Call& c, const Row& w, KRule* k) {
  if (!k->radix || !k->has_thr) return;
  int64_t mine;
  int64_t keep = localize_keep(c, w, *k, &mine);
  k->id_thr = c.off - 1;  // none of this rank's ties
  if (keep <= 0) return;
  for (int32_t t = 0; t < c.Vs; ++t) {
    const Col col = column(c, w, t);
    if (!col.in0 || order_key(col.x) != k->vkey) continue;
    k->id_thr = c.off + t;
    if (--keep == 0) break;
  }
}

// ---------------------------------------------------------------------------------------------
// Rounds RADIX and KEPT.
// ---------------------------------------------------------------------------------------------
DDS_HD void partial_radix_row(const Call& c, int32_t round, int32_t i, unsigned char* rowp) {
  RadixRec& rr = *reinterpret_cast<RadixRec*>(rowp);
  memset(&rr, 0, sizeof rr);
  Row w;
  make_row(c, i, true, &w);
  const Global g = global_stats(c, w);
  const KRule k = k_rule(c, w, g, false);
  if (!k.radix) return;
  const int d = round - c.first_radix;  // bytes already decided
  const GatheredBins bins{&c, &w};
  const double target = d > 0 ? (double)w.q.p * radix_z1(bins) : 0.0;
  const RadixState s = radix_walk(bins, target, d);
  if (s.keep_all) return;
  const int shift = 24 - 8 * d;
  for (int32_t t = 0; t < c.Vs; ++t) {
    const Col col = column(c, w, t);
    if (!col.in0) continue;
    const uint32_t key = order_key(col.x);
    if (d > 0 && (key >> (32 - 8 * d)) != s.prefix) continue;
    const uint32_t bin = (key >> shift) & 255u;
    rr.count[bin] += 1;
    rr.mass[bin] += dexp((double)col.x - g.Ma);
  }
}

DDS_HD void partial_kept_row(const Call& c, int32_t i, unsigned char* rowp) {
  KeptRec& kr = *reinterpret_cast<KeptRec*>(rowp);
  memset(&kr, 0, sizeof kr);
  clear_share(&kr.share, 0);
  Row w;
  make_row(c, i, true, &w);
  const Global g = global_stats(c, w);
  KRule k = k_rule(c, w, g, true);
  if (!k.filtered) return;
  localize(c, w, &k);
  for (int32_t t = 0; t < c.Vs; ++t) {
    const Col col = column(c, w, t);
    if (!in_rule(k, col, c.off + t)) continue;
    const double e = dexp((double)col.x - k.M);
    kr.count += 1;
    kr.z += e;
    kr.w += e * ((double)col.x - k.M);
  }
  make_share(c, w, k, k.M, &kr.share);
}

}  // namespace shard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_RULE_H_
