// Decoder primitives: dds_reveal (which positions to commit) and dds_verify_drafts (exact
// speculative verification). C ABI entry points, validation, and the CPU reference
// implementations (docs/decoding.md). Device backends override Backend::reveal / verify.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "allowed.h"
#include "checks.h"
#include "cpu_two_level.h"
#include "internal.h"
#include "offsets.h"
#include "rng.h"

namespace dds {
namespace {

constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr uint32_t kSaltVerifyBlock = 0x56424C31u;  // "VBL1"
constexpr uint32_t kSaltVerifyToken = 0x56544B31u;  // "VTK1"

dds_status check_ptrs(Backend& be, const char* fn,
                      std::initializer_list<std::pair<const char*, const void*>> ptrs) {
  for (const auto& p : ptrs) {
    dds_status st = check_ptr(be, fn, p.first, p.second, 1);
    if (st != DDS_OK) return st;
  }
  return DDS_OK;
}

// ------------------------------------------------------------------------------------------
// dds_reveal, CPU reference.
// ------------------------------------------------------------------------------------------
dds_status cpu_reveal(const dds_reveal_args& a) {
  if (a.request_status) std::fill(a.request_status, a.request_status + a.num_requests, 0);
  std::vector<int32_t> cand;
  std::vector<double> key;
  for (int32_t r = 0; r < a.num_requests; ++r) {
    int32_t status = 0;
    // The row_offsets rule (kernels/common/offsets.h): request r handles the rows [lo, hi) the
    // search gives it: its own rows when its offsets are good, else its orphan rows (never
    // revealed). Default position: i - row_offsets[r].
    const int32_t b = a.row_offsets ? a.row_offsets[r] : r;
    const bool rows_ok =
        offsets::good(b, a.row_offsets ? a.row_offsets[r + 1] : r + 1, r, a.num_requests, a.num_rows);
    if (!rows_ok) status |= DDS_REQ_BAD_ROW_OFFSETS;
    int32_t lo, hi;
    offsets::rows_of(a.row_offsets, a.num_requests, a.num_rows, r, &lo, &hi);
    int32_t* canvas = a.canvas ? a.canvas + (int64_t)r * a.canvas_stride : nullptr;
    // EOS rule: first EOS already in the canvas.
    int32_t first_eos = -1;
    if (canvas && a.eos_token >= 0) {
      for (int32_t p = 0; p < a.canvas_length; ++p)
        if (canvas[p] == a.eos_token) {
          first_eos = p;
          break;
        }
    }
    int32_t policy = a.policies ? a.policies[r] : a.policy;
    if (policy < DDS_REVEAL_TOP_N || policy > DDS_REVEAL_ENTROPY_BOUND) {
      policy = DDS_REVEAL_TOP_N;
      status |= DDS_REQ_BAD_POLICY;
    }
    const uint64_t seed = a.seeds ? a.seeds[r] : a.seed;
    const uint32_t step = a.steps ? a.steps[r] : a.step;
    float tau = a.position_temperatures ? a.position_temperatures[r] : a.position_temperature;
    if (std::isnan(tau) || tau < 0.f) status |= DDS_REQ_BAD_REVEAL_PARAM;
    if (!(tau > 0.f) || std::isinf(tau)) tau = 0.f;  // NaN, <= 0, inf: off
    if (a.thresholds && std::isnan(a.thresholds[r])) status |= DDS_REQ_BAD_REVEAL_PARAM;
    if (a.factors && (!std::isfinite(a.factors[r]) || a.factors[r] < 0.f))
      status |= DDS_REQ_BAD_REVEAL_PARAM;
    cand.clear();
    for (int32_t i = lo; i < hi; ++i) {
      a.reveal[i] = 0;
      if (!rows_ok) continue;
      const int32_t pos = a.positions ? a.positions[i] : i - b;
      bool ok = a.eligible ? a.eligible[i] != 0 : true;
      if (canvas && (pos < 0 || pos >= a.canvas_length)) {
        if (ok) status |= DDS_REQ_BAD_POSITION;
        ok = false;
      }
      if (ok && first_eos >= 0 && pos > first_eos) ok = false;
      if (ok) cand.push_back(i);
    }
    const int32_t m = (int32_t)cand.size();
    auto pos_of = [&](int32_t i) { return a.positions ? a.positions[i] : i - b; };
    auto score_of = [&](int32_t i) {
      const float s = a.scores[i];
      return std::isnan(s) ? -kInfD : (double)s;
    };
    // ENTROPY_BOUND ranks by -entropy (NaN entropy = +inf: last).
    auto entropy_of = [&](int32_t i) {
      const float s = a.scores[i];
      return std::isnan(s) ? kInfD : (double)s;
    };
    // Ranking key per candidate.
    key.assign((size_t)(hi - lo), 0.0);
    for (int32_t i : cand) {
      double k = score_of(i);
      if (policy == DDS_REVEAL_RANDOM) {
        k = (double)(random_bits(seed, step, (uint32_t)pos_of(i), 0u, kSaltReveal) >> 11);
      } else if (policy == DDS_REVEAL_ENTROPY_BOUND) {
        k = -entropy_of(i);
      } else if (policy == DDS_REVEAL_TOP_N && tau > 0.f) {
        k = k / (double)tau + gumbel(seed, step, (uint32_t)pos_of(i), 1u, kSaltReveal);
      }
      key[i - lo] = k;
    }
    std::sort(cand.begin(), cand.end(), [&](int32_t x, int32_t y) {
      const double kx = key[x - lo], ky = key[y - lo];
      if (kx != ky) return kx > ky;
      const int32_t px = pos_of(x), py = pos_of(y);
      return px != py ? px < py : x < y;
    });
    float bound = 0.f;  // ENTROPY_BOUND: NaN or negative -> 0, flagged
    if (policy == DDS_REVEAL_ENTROPY_BOUND) {
      bound = a.entropy_bounds ? a.entropy_bounds[r] : a.entropy_bound;
      if (std::isnan(bound) || bound < 0.f) {
        bound = 0.f;
        status |= DDS_REQ_BAD_ENTROPY_BOUND;
      }
    }
    int32_t n = 0;
    if (m > 0) {
      if (policy == DDS_REVEAL_TOP_N || policy == DDS_REVEAL_RANDOM) {
        n = a.counts ? a.counts[r] : a.count;
        if (n <= 0) {
          if (a.steps_left) {
            const int32_t sl = std::max(1, a.steps_left[r]);
            n = (m + sl - 1) / sl;
          } else {
            n = 1;
          }
        }
        n = std::min(n, m);
      } else if (policy == DDS_REVEAL_THRESHOLD) {
        const float t = a.thresholds ? a.thresholds[r] : a.threshold;
        n = 0;
        while (n < m && score_of(cand[n]) >= (double)t) ++n;  // NaN threshold: none pass
        n = std::max(n, 1);
      } else if (policy == DDS_REVEAL_ENTROPY_BOUND) {
        // The longest prefix (k >= 1) whose entropies, less the largest (the k-th), sum to at
        // most the bound; negative entropies count as 0, so the sum only grows with k.
        // sum = the first n entropies = the test's sum for prefix n + 1 (float64, in order).
        n = 1;
        double sum = std::max(0.0, entropy_of(cand[0]));
        while (n < m && sum <= (double)bound) sum += std::max(0.0, entropy_of(cand[n++]));
      } else {  // FACTOR
        const float f = a.factors ? a.factors[r] : a.factor;
        n = 1;
        for (int32_t k = 2; k <= m; ++k) {
          if (score_of(cand[k - 1]) >= 1.0 - (double)f / (double)(k + 1))
            n = k;
          else
            break;
        }
      }
    }
    for (int32_t k = 0; k < n; ++k) {
      const int32_t i = cand[k];
      a.reveal[i] = 1;
      if (canvas) canvas[pos_of(i)] = a.tokens[i];
    }
    if (a.num_revealed) a.num_revealed[r] = n;
    if (a.finished) {
      int32_t fin = 0;
      if (canvas && a.eos_token >= 0) {
        int32_t eos = -1;
        for (int32_t p = 0; p < a.canvas_length; ++p)
          if (canvas[p] == a.eos_token) {
            eos = p;
            break;
          }
        if (eos >= 0) {
          fin = 1;
          for (int32_t p = 0; p < eos; ++p)
            if (canvas[p] == a.mask_token) {
              fin = 0;
              break;
            }
        }
      }
      a.finished[r] = fin;
    }
    if (a.request_status) a.request_status[r] = status;
  }
  return DDS_OK;
}

// ------------------------------------------------------------------------------------------
// dds_verify_drafts, CPU reference: composed from the CPU dds_sample (probs output, processed
// statistics) so that p and q are exactly the distributions dds_sample samples from.
// ------------------------------------------------------------------------------------------

dds_status cpu_verify(Backend& cpu, const dds_sampler_config& cfg, const dds_verify_args& a) {
  const int32_t V = cfg.vocab_size;
  const int32_t n = a.num_drafts;
  dds_status st = DDS_OK;
  std::vector<float> P((size_t)(n + 1) * V), Q((size_t)std::max(n, 1) * V);
  if (a.request_status) std::fill(a.request_status, a.request_status + a.num_requests, 0);
  for (int32_t r = 0; r < a.num_requests; ++r) {
    int32_t count_status = 0;
    const int32_t nr = offsets::draft_count(a.draft_counts ? a.draft_counts[r] : n, n, &count_status);
    dds_sample_args s;
    dds_sample_args_init(&s, sizeof s);
    s.num_requests = 1;
    s.dtype = a.dtype;
    s.temperature = a.temperatures ? a.temperatures[r] : a.temperature;
    s.top_k = a.top_ks ? a.top_ks[r] : a.top_k;
    s.top_p = a.top_ps ? a.top_ps[r] : a.top_p;
    s.min_p = a.min_ps ? a.min_ps[r] : a.min_p;
    s.banned_token = a.banned_token;
    // The request's mask, as the only request of each dds_sample call below.
    s.allowed_token_masks = allowed_row(a.allowed_token_masks, a.allowed_mask_stride, r);
    s.allowed_mask_stride = a.allowed_mask_stride;
    s.stats = DDS_STATS_PROCESSED;
    s.probs_dtype = DDS_DTYPE_F32;
    s.probs_row_stride = V;
    int32_t status = 0;
    s.request_status = &status;
    const size_t esz = a.dtype == DDS_DTYPE_F32 ? 4 : 2;
    // Target rows p_0..p_nr.
    s.num_rows = nr + 1;
    s.row_stride = a.target_row_stride;
    s.logits = static_cast<const char*>(a.target_logits) +
               (size_t)r * (n + 1) * a.target_row_stride * esz;
    s.probs = P.data();
    s.row_offsets = nullptr;
    int32_t offs[2] = {0, nr + 1};
    s.row_offsets = offs;
    if ((st = cpu.sample(s, nullptr)) != DDS_OK) return st;
    int32_t req_status = status | count_status;
    for (int32_t i = 0; i < nr; ++i) {
      const int32_t d = a.draft_tokens[(size_t)r * n + i];
      if (d < 0 || d >= V) req_status |= DDS_REQ_BAD_TOKEN_ID;
    }
    if (nr > 0) {
      s.num_rows = nr;
      offs[1] = nr;
      s.row_stride = a.draft_row_stride;
      s.logits =
          static_cast<const char*>(a.draft_logits) + (size_t)r * n * a.draft_row_stride * esz;
      s.probs = Q.data();
      if ((st = cpu.sample(s, nullptr)) != DDS_OK) return st;
      req_status |= status;
    }
    const uint64_t seed = a.seeds ? a.seeds[r] : a.seed;
    const uint32_t step = a.steps ? a.steps[r] : a.step;
    int32_t* out = a.out_tokens + (size_t)r * (n + 1);
    float* outlp = a.out_logprobs ? a.out_logprobs + (size_t)r * (n + 1) : nullptr;
    for (int32_t e = 0; e <= n; ++e) {
      out[e] = -1;
      if (outlp) outlp[e] = -std::numeric_limits<float>::infinity();
    }
    auto logp = [&](int32_t i, int32_t t) {
      const double p = P[(size_t)i * V + t];
      return p > 0 ? (float)std::log(p) : -std::numeric_limits<float>::infinity();
    };
    int32_t acc = 0;
    std::vector<double> w(V);
    bool rejected = false;
    for (int32_t i = 0; i < nr; ++i) {
      const int32_t d = a.draft_tokens[(size_t)r * n + i];
      const bool in_range = d >= 0 && d < V;
      const double p = in_range ? (double)P[(size_t)i * V + d] : 0.0;
      const double q = in_range ? (double)Q[(size_t)i * V + d] : 0.0;
      const double u = bits_to_uniform(random_bits(seed, step, (uint32_t)i, 0u, kSaltVerify));
      if (u * q < p) {
        out[i] = d;
        if (outlp) outlp[i] = logp(i, d);
        ++acc;
        continue;
      }
      // Rejected: sample from the normalised residual max(p - q, 0), or p if that is all 0.
      bool any = false;
      for (int32_t t = 0; t < V; ++t) {
        const double rr = (double)P[(size_t)i * V + t] - (double)Q[(size_t)i * V + t];
        w[t] = rr > 0 ? std::log(rr) : -kInfD;
        any |= rr > 0;
      }
      if (!any)
        for (int32_t t = 0; t < V; ++t) {
          const double pp = P[(size_t)i * V + t];
          w[t] = pp > 0 ? std::log(pp) : -kInfD;
        }
      const int32_t tok = two_level_gumbel_max(V, [&](int32_t t) { return w[t]; }, seed, step, (uint32_t)i,
                                             kSaltVerifyBlock, kSaltVerifyToken);
      out[i] = tok;
      if (outlp) outlp[i] = logp(i, tok);
      rejected = true;
      break;
    }
    if (!rejected) {
      for (int32_t t = 0; t < V; ++t) {
        const double pp = P[(size_t)nr * V + t];
        w[t] = pp > 0 ? std::log(pp) : -kInfD;
      }
      const int32_t tok = two_level_gumbel_max(V, [&](int32_t t) { return w[t]; }, seed, step, (uint32_t)nr,
                                             kSaltVerifyBlock, kSaltVerifyToken);
      out[nr] = tok;
      if (outlp) outlp[nr] = logp(nr, tok);
    }
    a.accepted_counts[r] = acc;
    if (a.request_status) a.request_status[r] = req_status;
  }
  return DDS_OK;
}

dds_status validate_reveal(dds_sampler* s, dds_reveal_args* a, dds_stream stream) {
  const char* fn = "dds_reveal";
  dds_status st = check_num_rows(fn, s, a->num_rows);
  if (st != DDS_OK || a->num_rows == 0) return st;
  // num_requests <= num_rows is checked before the max_requests capacity here.
  if ((st = check_requests_fit(fn, a->num_requests, a->num_rows)) != DDS_OK ||
      (st = check_requests(fn, s, a->num_requests, a->num_rows, a->row_offsets)) != DDS_OK)
    return st;
  if (!a->scores) return fail(DDS_ERR_NULL_POINTER, "%s: args->scores is NULL", fn);
  if (!a->reveal) return fail(DDS_ERR_NULL_POINTER, "%s: args->reveal is NULL", fn);
  if (a->policy < DDS_REVEAL_TOP_N || a->policy > DDS_REVEAL_ENTROPY_BOUND)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->policy (%d) is not a dds_reveal_policy (0..4)",
                fn, a->policy);
  if (std::isnan(a->threshold))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->threshold must not be NaN", fn);
  if (!std::isfinite(a->factor) || a->factor < 0.f)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->factor (%g) must be finite and >= 0", fn,
                (double)a->factor);
  if (std::isnan(a->entropy_bound) || a->entropy_bound < 0.f)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->entropy_bound (%g) must be >= 0 (nats; +inf reveals every eligible row)",
                fn, (double)a->entropy_bound);
  if (std::isnan(a->position_temperature) || a->position_temperature < 0.f)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->position_temperature (%g) must be >= 0", fn,
                (double)a->position_temperature);
  if (a->canvas) {
    if (a->canvas_length < 1)
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->canvas_length (%d) must be >= 1 with a canvas",
                  fn, a->canvas_length);
    if (a->canvas_stride == 0) a->canvas_stride = a->canvas_length;
    if (a->canvas_stride < a->canvas_length)
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->canvas_stride (%lld) must be >= canvas_length (%d)",
                  fn, (long long)a->canvas_stride, a->canvas_length);
    if (!a->tokens)
      return fail(DDS_ERR_NULL_POINTER, "%s: args->tokens is NULL but a canvas is given", fn);
  } else if (a->eos_token >= 0 && a->finished) {
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->finished with eos_token >= 0 needs args->canvas (the EOS rule reads it)", fn);
  }
  Backend& be = *s->backend;
  st = check_ptrs(be, fn, {{"row_offsets", a->row_offsets}, {"positions", a->positions},
                                      {"scores", a->scores}, {"eligible", a->eligible},
                                      {"policies", a->policies}, {"counts", a->counts},
                                      {"steps_left", a->steps_left}, {"thresholds", a->thresholds},
                                      {"factors", a->factors},
                                      {"entropy_bounds", a->entropy_bounds},
                                      {"position_temperatures", a->position_temperatures},
                                      {"seeds", a->seeds}, {"steps", a->steps},
                                      {"canvas", a->canvas}, {"tokens", a->tokens},
                                      {"reveal", a->reveal}, {"num_revealed", a->num_revealed},
                                      {"finished", a->finished},
                                      {"request_status", a->request_status}});
  if (st != DDS_OK) return st;
  if (!debug_checks(s)) return DDS_OK;
  if ((st = debug_row_offsets(s, fn, a->row_offsets, a->num_requests, a->num_rows, stream)) !=
      DDS_OK)
    return st;
  // The DDS_REQ_BAD_REVEAL_PARAM conditions (the host scalars' rules).
  const int32_t n = a->num_requests;
  std::vector<float> h;
  if (a->thresholds) {
    if ((st = fetch(be, a->thresholds, (size_t)n, &h, stream)) != DDS_OK) return st;
    for (int32_t r = 0; r < n; ++r)
      if (std::isnan(h[r]))
        return fail(DDS_ERR_INVALID_VALUE, "%s: args->thresholds[%d] (request %d) must not be NaN",
                    fn, r, r);
  }
  if (a->factors) {
    if ((st = fetch(be, a->factors, (size_t)n, &h, stream)) != DDS_OK) return st;
    for (int32_t r = 0; r < n; ++r)
      if (!std::isfinite(h[r]) || h[r] < 0.f)
        return fail(DDS_ERR_INVALID_VALUE,
                    "%s: args->factors[%d] (request %d) = %g must be finite and >= 0", fn, r, r,
                    (double)h[r]);
  }
  if (a->position_temperatures) {
    if ((st = fetch(be, a->position_temperatures, (size_t)n, &h, stream)) != DDS_OK) return st;
    for (int32_t r = 0; r < n; ++r)
      if (std::isnan(h[r]) || h[r] < 0.f)
        return fail(DDS_ERR_INVALID_VALUE,
                    "%s: args->position_temperatures[%d] (request %d) = %g must be >= 0", fn, r, r,
                    (double)h[r]);
  }
  return DDS_OK;
}

dds_status validate_verify(dds_sampler* s, dds_verify_args* a, dds_stream stream) {
  const char* fn = "dds_verify_drafts";
  const int32_t V = s->config.vocab_size;
  dds_status st = check_request_count(fn, s, a->num_requests);
  if (st != DDS_OK) return st;
  if (a->num_drafts < 0)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->num_drafts (%d) must be >= 0", fn, a->num_drafts);
  if ((int64_t)a->num_requests * (a->num_drafts + 1) > s->config.max_rows)
    return fail(DDS_ERR_CAPACITY,
                "%s: args->num_requests * (num_drafts + 1) (%lld) exceeds the sampler's max_rows (%d)",
                fn, (long long)a->num_requests * (a->num_drafts + 1), s->config.max_rows);
  if (!a->target_logits) return fail(DDS_ERR_NULL_POINTER, "%s: args->target_logits is NULL", fn);
  if (a->num_drafts > 0 && !a->draft_logits)
    return fail(DDS_ERR_NULL_POINTER, "%s: args->draft_logits is NULL with num_drafts > 0", fn);
  if (a->num_drafts > 0 && !a->draft_tokens)
    return fail(DDS_ERR_NULL_POINTER, "%s: args->draft_tokens is NULL with num_drafts > 0", fn);
  if (!a->accepted_counts) return fail(DDS_ERR_NULL_POINTER, "%s: args->accepted_counts is NULL", fn);
  if (!a->out_tokens) return fail(DDS_ERR_NULL_POINTER, "%s: args->out_tokens is NULL", fn);
  if ((st = check_dtype(fn, "dtype", a->dtype)) != DDS_OK ||
      (st = resolve_stride(fn, "target_row_stride", &a->target_row_stride, V,
                           (int64_t)a->num_requests * (a->num_drafts + 1))) != DDS_OK ||
      (st = resolve_stride(fn, "draft_row_stride", &a->draft_row_stride, V,
                           (int64_t)a->num_requests * a->num_drafts)) != DDS_OK ||
      (st = check_filters(fn, a->temperature, a->top_k, a->top_p, a->min_p)) != DDS_OK ||
      (st = check_banned_token(fn, a->banned_token, V)) != DDS_OK)
    return st;
  if ((st = resolve_mask_stride(*s->backend, fn, a->allowed_token_masks,
                                &a->allowed_mask_stride, V, a->num_requests)) != DDS_OK)
    return st;
  st = check_ptrs(*s->backend, fn,
                  {{"draft_counts", a->draft_counts}, {"draft_tokens", a->draft_tokens},
                   {"draft_logits", a->draft_logits}, {"target_logits", a->target_logits},
                   {"temperatures", a->temperatures}, {"top_ks", a->top_ks},
                   {"top_ps", a->top_ps}, {"min_ps", a->min_ps}, {"seeds", a->seeds},
                   {"steps", a->steps}, {"accepted_counts", a->accepted_counts},
                   {"out_tokens", a->out_tokens}, {"out_logprobs", a->out_logprobs},
                   {"request_status", a->request_status}});
  if (st != DDS_OK) return st;
  if (a->draft_counts && debug_checks(s)) {
    std::vector<int32_t> h;
    if ((st = fetch(*s->backend, a->draft_counts, (size_t)a->num_requests, &h, stream)) != DDS_OK)
      return st;
    for (int32_t r = 0; r < a->num_requests; ++r)
      if (h[r] < 0 || h[r] > a->num_drafts)
        return fail(DDS_ERR_INVALID_VALUE,
                    "%s: args->draft_counts[%d] (request %d) = %d must be in [0, num_drafts = %d]",
                    fn, r, r, h[r], a->num_drafts);
  }
  if (a->num_drafts > 0 && debug_checks(s)) {
    // Draft tokens (DDS_REQ_BAD_TOKEN_ID): each request's first n_r (valid counts: above).
    std::vector<int32_t> d, c;
    if ((st = fetch(*s->backend, a->draft_tokens, (size_t)a->num_requests * a->num_drafts, &d,
                     stream)) != DDS_OK)
      return st;
    if (a->draft_counts &&
        (st = fetch(*s->backend, a->draft_counts, (size_t)a->num_requests, &c, stream)) != DDS_OK)
      return st;
    for (int32_t r = 0; r < a->num_requests; ++r)
      for (int32_t i = 0; i < (a->draft_counts ? c[r] : a->num_drafts); ++i) {
        const int32_t t = d[(size_t)r * a->num_drafts + i];
        if (t < 0 || t >= V)
          return fail(DDS_ERR_INVALID_VALUE,
                      "%s: args->draft_tokens[%d] (request %d, draft %d) = %d must be in [0, "
                      "vocab_size = %d)",
                      fn, r * a->num_drafts + i, r, i, t, V);
      }
  }
  return DDS_OK;
}

}  // namespace
}  // namespace dds

using dds::fail;

extern "C" {

DDS_API dds_status dds_reveal_args_init(dds_reveal_args* args, size_t struct_size) {
  dds_reveal_args d;
  std::memset(&d, 0, sizeof d);
  d.num_requests = 1;
  d.policy = DDS_REVEAL_TOP_N;
  d.count = 1;
  d.threshold = 0.9f;
  d.factor = 1.0f;
  d.mask_token = -1;
  d.eos_token = -1;
  d.entropy_bound = 0.1f;
  return dds::init_struct("dds_reveal_args_init", "args", args, struct_size, d,
                          dds::kRevealArgsV1Size);
}

DDS_API dds_status dds_verify_args_init(dds_verify_args* args, size_t struct_size) {
  dds_verify_args d;
  std::memset(&d, 0, sizeof d);
  d.num_requests = 1;
  d.dtype = DDS_DTYPE_F32;
  d.temperature = 1.f;
  d.top_p = 1.f;
  d.banned_token = -1;
  return dds::init_struct("dds_verify_args_init", "args", args, struct_size, d,
                          dds::kVerifyArgsV1Size);
}

DDS_API dds_status dds_reveal(dds_sampler* sampler, const dds_reveal_args* args, dds_stream stream) {
  return dds::args_entry("dds_reveal", sampler, args, stream, dds::kRevealArgsV1Size,
                         "dds_reveal_args", "dds_reveal_args_init", dds_reveal_args_init,
                         dds::validate_reveal, [&](const dds_reveal_args& a) {
                           if (a.num_rows == 0) return DDS_OK;
                           if (sampler->backend->host_readable()) return dds::cpu_reveal(a);
                           return sampler->backend->reveal(a, stream);
                         });
}

DDS_API dds_status dds_verify_drafts(dds_sampler* sampler, const dds_verify_args* args,
                                     dds_stream stream) {
  return dds::args_entry("dds_verify_drafts", sampler, args, stream, dds::kVerifyArgsV1Size,
                         "dds_verify_args", "dds_verify_args_init", dds_verify_args_init,
                         dds::validate_verify, [&](const dds_verify_args& a) {
                           if (sampler->backend->host_readable())
                             return dds::cpu_verify(*sampler->backend, sampler->config, a);
                           return sampler->backend->verify(a, stream);
                         });
}

}  // extern "C"
