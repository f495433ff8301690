// Dispatch of dds_sample on the CUDA backend: packs the validated arguments into the kernels'
// parameter block and queues the kernels of kernels/sample.cuh on the caller's stream.
// No allocation, no host synchronisation, no device-to-host read: per-request values are read
// (and sanitised) inside the kernels, so the call is graph-capturable.
#include <cstdint>
#include <cstdlib>

#include "cuda_internal.h"
#include "sample.cuh"

namespace dds {

namespace {
size_t align_up(size_t x) { return (x + 255) & ~(size_t)255; }
struct SampleWs {
  size_t counters, fb, recs, rowinfo, cand, kmass, fb_rows, total;
};
// Zero at rest (reset by the kernels themselves): counters[rows], fb = {fb_count, fb_done}.
SampleWs sample_ws_layout(const dds_sampler_config& cfg) {
  const size_t rows = (size_t)(cfg.max_rows > 0 ? cfg.max_rows : 1);
  const size_t nb = (size_t)((cfg.vocab_size + kBlockSize - 1) / kBlockSize);
  SampleWs w;
  w.counters = 0;
  w.fb = align_up(w.counters + rows * sizeof(int));
  w.recs = align_up(w.fb + 2 * sizeof(int));
  w.rowinfo = align_up(w.recs + rows * nb * sizeof(ksample::BlockRec));
  w.cand = align_up(w.rowinfo + rows * sizeof(ksample::RowInfo));
  size_t cand_bytes = 0, kmass_bytes = 0, fb_bytes = 0;
  if (ksample::kUseCandidates) {
    cand_bytes = rows * nb * (size_t)ksample::cand_cap_for(cfg.vocab_size) * sizeof(int2);
    kmass_bytes = rows * nb * sizeof(unsigned long long);
    fb_bytes = rows * sizeof(int);
  }
  w.kmass = align_up(w.cand + cand_bytes);
  w.fb_rows = align_up(w.kmass + kmass_bytes);
  w.total = align_up(w.fb_rows + fb_bytes);
  return w;
}
// An integer tuning knob from the environment (`def` when unset or empty); callers keep it in a
// function-local static, so it is read once per process.
int env_knob(const char* name, int def) {
  const char* e = std::getenv(name);
  return e && *e ? std::atoi(e) : def;
}
}  // namespace

size_t cuda_sample_workspace_bytes(const dds_sampler_config& cfg) {
  // Called at dds_create with the sampler's device current: also the place to raise the filter
  // kernel's dynamic shared memory limit once (not a stream operation).
  ksample::prepare_sample_kernels(cfg.vocab_size);
  cudaGetLastError();
  return sample_ws_layout(cfg).total;
}

dds_status cuda_sample(const CudaContext& ctx, const dds_sample_args& a, cudaStream_t stream) {
  const int V = ctx.config.vocab_size;
  const SampleWs w = sample_ws_layout(ctx.config);
  if (ctx.workspace == nullptr || ctx.workspace_bytes < w.total)
    return fail(DDS_ERR_INTERNAL, "dds_sample: the CUDA workspace is smaller than needed");
  char* ws = static_cast<char*>(ctx.workspace);
  ksample::SampleParams P{};
  P.V = V;
  P.nblocks = (V + kBlockSize - 1) / kBlockSize;
  P.num_rows = a.num_rows;
  P.num_requests = a.num_requests;
  P.row_offsets = a.row_offsets;
  P.positions = a.positions;
  P.logits = a.logits;
  P.row_stride = a.row_stride;
  P.uncond = a.uncond_logits;
  P.uncond_stride = a.uncond_row_stride;
  P.uncond_num_rows = a.uncond_num_rows;
  P.uncond_row_offsets = a.uncond_row_offsets;
  P.gs = a.guidance_scales;
  P.g = a.guidance_scale;
  P.temps = a.temperatures;
  P.temp = a.temperature;
  P.ks = a.top_ks;
  P.k = a.top_k;
  P.ps = a.top_ps;
  P.p = a.top_p;
  P.minps = a.min_ps;
  P.minp = a.min_p;
  P.seeds = a.seeds;
  P.seed = a.seed;
  P.steps = a.steps;
  P.step = a.step;
  P.banned = a.banned_token;
  P.stats_guided = a.stats == DDS_STATS_GUIDED;
  P.want_stats = (a.logprobs || a.confidence || a.margin || a.entropy || a.probs) ? 1 : 0;
  P.tokens = a.tokens;
  P.logprobs = a.logprobs;
  P.argmax = a.argmax;
  P.confidence = a.confidence;
  P.margin = a.margin;
  P.entropy = a.entropy;
  P.probs = a.probs;
  P.probs_dtype = a.probs_dtype;
  P.probs_stride = a.probs_row_stride;
  P.request_status = a.request_status;
  const size_t esz = dtype_size(a.dtype);
  bool vec = ((uintptr_t)a.logits % 16 == 0) && ((size_t)a.row_stride * esz) % 16 == 0;
  if (a.uncond_logits)
    vec = vec && ((uintptr_t)a.uncond_logits % 16 == 0) &&
          ((size_t)a.uncond_row_stride * esz) % 16 == 0;
  P.vec_ok = vec ? 1 : 0;
  P.smem_row = 0;
  P.counters = reinterpret_cast<int*>(ws + w.counters);
  P.recs = reinterpret_cast<ksample::BlockRec*>(ws + w.recs);
  P.rowinfo = reinterpret_cast<ksample::RowInfo*>(ws + w.rowinfo);
  P.cand = reinterpret_cast<int2*>(ws + w.cand);
  P.cand_cap = ksample::cand_cap_for(V);
  P.cand_lvl0 = ksample::cand_lvl0_for(V);
  P.kmass = reinterpret_cast<unsigned long long*>(ws + w.kmass);
  P.fb_rows = reinterpret_cast<int*>(ws + w.fb_rows);
  P.fb_count = reinterpret_cast<int*>(ws + w.fb);
  P.fb_done = reinterpret_cast<unsigned*>(ws + w.fb + sizeof(int));

  // Which row kernels can have work, from the host-visible scalars only (device arrays may
  // change between graph replays, so any array means "maybe").
  const bool arrays = a.top_ks || a.top_ps || a.min_ps;
  const bool scalar_filter = (a.top_k > 0 && a.top_k < V) || a.top_p < 1.f || a.min_p > 0.f;
  const float invT = a.temperature > 0.f ? 1.0f / a.temperature : 0.f;
  const bool scalar_greedy = !(a.temperature > 0.f) || invT > 3.0e38f;
  const bool all_filtered = !arrays && scalar_filter && !a.temperatures && !scalar_greedy;
  const bool none_filtered = !arrays && !scalar_filter;
  const bool run_plain = !all_filtered;
  const bool run_filter = !none_filtered;
  // Dispatch: the default rules of kernels/sample.cuh (plain_fuse_default, pass_top2_default);
  // DDS_SAMPLE_FUSE=0/1, DDS_SAMPLE_BLOCK_APPROX=0, DDS_SAMPLE_DIRECT_FILTER=1,
  // DDS_SAMPLE_FBPW=N and DDS_SAMPLE_CF_WPC=N (cand_finish rows per CTA) override them
  // for A/B runs. DDS_SAMPLE_DIRECT_FILTER=1 sends every filtered row straight to filter_kernel,
  // a CTA per row, without the candidate lists: faster on small problems (device A/B 2026-11-29
  // 16:23 UTC, f32: 64 x 1025 top-p 150 -> 50 us, min-p 80 -> 22 us, 64 x 32000 top-k 142 -> 74
  // us; from 256 rows the lists win: 1024 x 1025 top-k 61 us with lists, 293 us direct), but not
  // the default: choosing it by the batch's row count would make a request's statistics
  // (logprob, entropy: the two paths sum in different orders) depend on the batch it rides in
  // (tests/gpu/test_gpu_sample.cu, "batch invariance").
  static const int fuse_env = env_knob("DDS_SAMPLE_FUSE", -1);
  static const int approx_env = env_knob("DDS_SAMPLE_BLOCK_APPROX", 1);
  static const int direct_env = env_knob("DDS_SAMPLE_DIRECT_FILTER", 0);
  static const int fbpw_env = env_knob("DDS_SAMPLE_FBPW", ksample::kFilteredBpwMax);
  static const int cfwpc_env = env_knob("DDS_SAMPLE_CF_WPC", 0);  // cand_finish warps per CTA
  P.cf_wpc = cfwpc_env;
  static const int small_env = env_knob("DDS_SAMPLE_SMALL", 1);  // 0: V <= 2048 takes pass + finish
  P.small_plain = small_env != 0 && P.nblocks <= 2 ? 1 : 0;
  // DDS_SAMPLE_SMALL_EXACT=1 (tests): every column of the winning block scored in float64 (the
  // kernel's rare path: several candidates in one lane); same tokens, slower.
  static const int small_exact_env = env_knob("DDS_SAMPLE_SMALL_EXACT", 0);
  P.small_exact_all = small_exact_env != 0 ? 1 : 0;
  // DDS_SAMPLE_SMALL_CTA=0/1: small_plain_kernel and small_filter_kernel with a warp / a CTA per
  // row (default: small_cta_default, a CTA per row up to two rows per SM, and
  // small_filter_cta_default, up to four).
  static const int small_cta_env = env_knob("DDS_SAMPLE_SMALL_CTA", -1);
  P.small_cta = small_cta_env >= 0 ? (small_cta_env != 0 ? 1 : 0)
                                   : (ksample::small_cta_default(a.num_rows, ctx.num_sms) ? 1 : 0);
  P.small_filter_cta = small_cta_env >= 0 ? (small_cta_env != 0 ? 1 : 0)
                                          : (ksample::small_filter_cta_default(a.num_rows, ctx.num_sms) ? 1 : 0);
  // DDS_SAMPLE_SMALL_FILTER=0: filtered rows of V <= 2048 take the general path (row pass,
  // candidate lists, cand_finish, fallback) instead of small_filter_kernel (A/B runs).
  static const int small_filter_env = env_knob("DDS_SAMPLE_SMALL_FILTER", 1);
  P.small_filter = small_filter_env != 0 && P.nblocks <= 2 && ksample::kUseCandidates &&
                   direct_env <= 0 ? 1 : 0;
  // DDS_SAMPLE_BPW=N: N blocks per warp in the unfiltered pass (A/B runs; no output depends on it).
  static const int bpw_env = env_knob("DDS_SAMPLE_BPW", 0);
  P.bpw = bpw_env > 0 ? bpw_env : ksample::plain_bpw(P.num_rows, P.nblocks);
  P.fbpw = ksample::filtered_bpw(a.dtype, P.num_rows, P.nblocks, fbpw_env);
  const int wpr = (P.nblocks + P.bpw - 1) / P.bpw;
  // DDS_SAMPLE_PDL=1: programmatic dependent launch between the kernels of a call (compute
  // capability >= 9; launch_sample_dt). Off by default: on the H200 (ninth session) it took 1-2
  // us off two-kernel calls launched on a stream (dds_profile_sample: 8 x 262144 f32 plain 22.0
  // -> 20.3 us) but added 1.5-4 us to them in CUDA-graph replays (dds_bench, two runs each: 8 x
  // 262144 f32 plain 23.3 / 23.6 -> 25.5 / 24.9 us, 8 x 1025 f32 mix 36.9 / 36.3 -> 41.0 / 40.4).
  static const int pdl_env = env_knob("DDS_SAMPLE_PDL", 0);
  P.pdl = pdl_env != 0 && ctx.cc_major >= 9 ? 1 : 0;
  const bool fuse = fuse_env >= 0 ? fuse_env != 0 : ksample::plain_fuse_default(a.num_rows, P.nblocks);
  P.fuse_finish = run_plain && fuse && !P.small_plain ? 1 : 0;
  P.block_approx = approx_env != 0 ? 1 : 0;
  P.direct_filter = direct_env > 0 ? 1 : 0;
  P.pass_top2 = ksample::pass_top2_default(a.num_rows, P.nblocks) ? 1 : 0;
  // Zero-at-rest counters cannot be assumed: the workspace is shared with dds_verify_drafts,
  // whose scratch starts at offset 0. Clear them on the stream (memset nodes under graph
  // capture; no host synchronisation): the per-row warp counters of a fused finish with several
  // warps per row (only under DDS_SAMPLE_FUSE=1), the fallback list's two counters.
  if (P.fuse_finish && wpr > 1) {
    const cudaError_t me = cudaMemsetAsync(ws + w.counters, 0, (size_t)a.num_rows * sizeof(int), stream);
    if (me != cudaSuccess)
      return fail(DDS_ERR_CUDA, "dds_sample: cudaMemsetAsync failed: %s", cudaGetErrorString(me));
  }
  if (ksample::kUseCandidates && run_filter && !P.direct_filter && !P.small_filter) {
    const cudaError_t me = cudaMemsetAsync(ws + w.fb, 0, 2 * sizeof(int), stream);
    if (me != cudaSuccess)
      return fail(DDS_ERR_CUDA, "dds_sample: cudaMemsetAsync failed: %s", cudaGetErrorString(me));
  }
  cudaError_t e = ksample::launch_sample(a.dtype, P, run_plain, run_filter, ctx.num_sms, stream);
  if (e != cudaSuccess)
    return fail(DDS_ERR_CUDA, "dds_sample: kernel launch failed: %s (%s)", cudaGetErrorName(e),
                cudaGetErrorString(e));
  return DDS_OK;
}

}  // namespace dds
