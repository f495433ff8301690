/*
 * dds_demo: a complete, small masked-diffusion decode loop on top of dds_sample.
 *
 * The "model" is a character bigram table counted from a paragraph of text (vocabulary of 64
 * tokens: 63 characters plus a MASK token). Two requests share every step: each has a canvas of
 * 40 positions that starts as a short prompt followed by MASK. Each step
 *   1. the model scores every still-masked position of both canvases from its revealed left and
 *      right neighbours: log P(x | left) + log P(right | x). Only the masked rows are packed (a
 *      ragged number per request), and `positions` gives each row's canvas position, so the
 *      random numbers do not depend on how the rows were packed;
 *   2. dds_sample draws a token per row with per-request temperature and top-p; request 1 also
 *      uses classifier-free guidance (its unconditional rows are the model without context),
 *      request 0 does not - a mixed batch. The MASK token is banned. Statistics are
 *      "guided" (temperature 1, no filters), which is what LLaDA / Fast-dLLM rank positions by;
 *   3. dds_reveal (TOP_N, n = ceil(masked / steps left)) reveals each request's most confident
 *      positions and writes their tokens into the canvas, on the same stream; the canvas is
 *      printed with the step's timings.
 *
 * Backend: the CUDA backend when this libdds has it and a device is usable, else the CPU backend;
 * the program says which and why. To stay pure C with no CUDA headers or libraries at build time,
 * the CUDA path loads the CUDA *driver* (libcuda.so.1, present wherever a GPU driver is) with
 * dlopen for cuMemAlloc / cuMemcpy, in the primary context that libdds's CUDA runtime also uses.
 * If anything on that path fails (no driver, no device, a CUDA call fails, or this build's CUDA
 * kernels cannot run the call), the demo says so and runs on the CPU backend.
 * DDS_DEMO_BACKEND=cpu forces the CPU backend.
 *
 * Exit status 0 when both canvases are fully revealed with no MASK token and no request flags.
 */
#define _POSIX_C_SOURCE 200809L
#include <dds/dds.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ----------------------------------------------------------------------------------------------
 * The tiny model.
 * -------------------------------------------------------------------------------------------- */
#define VOCAB 64
#define MASK 63
#define CANVAS 40
#define NREQ 2
#define STEPS 12
#define MAX_ROWS (NREQ * CANVAS)

/* Token id -> character (63 characters; MASK prints as '_'). */
static const char kAlphabet[] = " abcdefghijklmnopqrstuvwxyz.,;:'-!?0123456789ABCDEFGHIJKLMNOPQR";

static const char kCorpus[] =
    "the model looks at the whole canvas at once and scores every masked position. the sampler "
    "draws a token for each one, and the decoder keeps the tokens it is most sure of. then the "
    "model looks again, with more of the canvas in view. step by step the canvas fills, the easy "
    "letters first and the hard ones last, until no mask is left. a small model can write a line "
    "this way, and a larger one can write a whole page of text in a few steps.";

/* The model is the exact posterior of a character Markov chain (transition matrix P counted
 * from kCorpus): given the nearest revealed token `a` at distance d to the left and `c` at distance
 * e to the right of a masked position, P(x | a, c) ~ P^d[a][x] * P^e[x][c]. Far from any revealed
 * token it is unsure (close to the unigram), next to revealed text it is confident, so the canvas
 * fills outwards from its context. */
static float g_logpow[CANVAS][VOCAB][VOCAB]; /* log (P^d)[a][b], d = 1 .. CANVAS - 1 */
static float g_uncond[VOCAB];                /* log P(x) with no context */

static int char_to_token(char c) {
  const char* p = strchr(kAlphabet, c);
  return (p != NULL && c != '\0') ? (int)(p - kAlphabet) : 0;
}

static void build_model(void) {
  static double counts[VOCAB][VOCAB], trans[VOCAB][VOCAB], pw[VOCAB][VOCAB], next[VOCAB][VOCAB];
  const double alpha = 0.01; /* add-alpha smoothing over the 63 real tokens */
  size_t i, n = strlen(kCorpus);
  int a, b, k, d;
  for (i = 0; i + 1 < n; ++i) counts[char_to_token(kCorpus[i])][char_to_token(kCorpus[i + 1])] += 1;
  for (a = 0; a < MASK; ++a) {
    double row = 0;
    for (b = 0; b < MASK; ++b) row += counts[a][b];
    for (b = 0; b < MASK; ++b) pw[a][b] = trans[a][b] = (counts[a][b] + alpha) / (row + alpha * MASK);
  }
  for (d = 1; d < CANVAS; ++d) {
    for (a = 0; a < MASK; ++a) {
      for (b = 0; b < MASK; ++b) g_logpow[d][a][b] = (float)log(pw[a][b]);
      g_logpow[d][a][MASK] = 5.0f; /* the model likes to predict MASK: the sampler bans it */
    }
    for (a = 0; a < MASK; ++a) /* pw <- pw * trans */
      for (b = 0; b < MASK; ++b) {
        double sum = 0;
        for (k = 0; k < MASK; ++k) sum += pw[a][k] * trans[k][b];
        next[a][b] = sum;
      }
    memcpy(pw, next, sizeof pw);
  }
  /* The unconditional model: the chain's distribution far from any context (P^CANVAS from a
   * space, close to the stationary distribution), consistent with the conditional one. */
  for (b = 0; b < MASK; ++b) g_uncond[b] = (float)log(pw[0][b]);
  g_uncond[MASK] = 5.0f;
}

/* Conditional logits of canvas position i from its nearest revealed neighbours. */
static void model_cond(const int* canvas, int i, float* out) {
  int left = i - 1, right = i + 1, x;
  while (left >= 0 && canvas[left] == MASK) --left;
  while (right < CANVAS && canvas[right] == MASK) ++right;
  for (x = 0; x < VOCAB; ++x) {
    float l = left >= 0 ? g_logpow[i - left][canvas[left]][x] : g_uncond[x];
    if (right < CANVAS && x != MASK) l += g_logpow[right - i][x][canvas[right]];
    out[x] = l;
  }
}

/* Unconditional logits (no context at all). */
static void model_uncond(float* out) { memcpy(out, g_uncond, sizeof g_uncond); }

/* ----------------------------------------------------------------------------------------------
 * Buffers: one host arena; on the CUDA backend a device arena of the same layout, copied in
 * (inputs) and out (outputs) around each dds_sample call.
 * -------------------------------------------------------------------------------------------- */
typedef struct {
  /* inputs */
  float logits[MAX_ROWS * VOCAB];
  float uncond[MAX_ROWS * VOCAB];
  int32_t row_offsets[NREQ + 1];
  int32_t positions[MAX_ROWS];
  int32_t uncond_row_offsets[NREQ];
  float temperatures[NREQ];
  float top_ps[NREQ];
  float guidance_scales[NREQ];
  uint64_t seeds[NREQ];
  /* outputs (from here on) */
  int32_t tokens[MAX_ROWS];
  float confidence[MAX_ROWS];
  int32_t request_status[NREQ];
  /* dds_reveal state and output */
  int32_t steps_left[NREQ];
  int32_t canvas[NREQ * CANVAS];
  uint8_t reveal[MAX_ROWS];
} Arena;
#define OUTPUTS_OFFSET offsetof(Arena, tokens)

/* The CUDA driver API, loaded at run time (no CUDA headers: the few types are spelled out). */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct {
  void* lib;
  int device;
  void* ctx;
  CUdeviceptr base;
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDeviceGet)(int*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(void**, int);
  CUresult (*cuDevicePrimaryCtxRelease)(int);
  CUresult (*cuCtxSetCurrent)(void*);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
} Cuda;

static int cu_sym(Cuda* cu, const char* name, void* fn, size_t size) {
  void* p = dlsym(cu->lib, name);
  if (p == NULL) return 0;
  memcpy(fn, &p, size); /* object pointer -> function pointer, as POSIX allows */
  return 1;
}
#define CU_SYM(cu, name, field) cu_sym((cu), (name), &(cu)->field, sizeof((cu)->field))

/* Opens the driver, retains device 0's primary context and allocates the device arena. On
 * failure writes the reason and returns 0. */
static int cuda_open(Cuda* cu, char* why, size_t why_size) {
  CUresult r;
  memset(cu, 0, sizeof *cu);
  cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cu->lib == NULL) {
    snprintf(why, why_size, "cannot load the CUDA driver (libcuda.so.1): %s", dlerror());
    return 0;
  }
  if (!CU_SYM(cu, "cuInit", cuInit) || !CU_SYM(cu, "cuDeviceGet", cuDeviceGet) ||
      !CU_SYM(cu, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain) ||
      !(CU_SYM(cu, "cuDevicePrimaryCtxRelease_v2", cuDevicePrimaryCtxRelease) ||
        CU_SYM(cu, "cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease)) ||
      !CU_SYM(cu, "cuCtxSetCurrent", cuCtxSetCurrent) ||
      !CU_SYM(cu, "cuCtxSynchronize", cuCtxSynchronize) ||
      !CU_SYM(cu, "cuMemAlloc_v2", cuMemAlloc) || !CU_SYM(cu, "cuMemFree_v2", cuMemFree) ||
      !CU_SYM(cu, "cuMemcpyHtoD_v2", cuMemcpyHtoD) ||
      !CU_SYM(cu, "cuMemcpyDtoH_v2", cuMemcpyDtoH)) {
    snprintf(why, why_size, "the CUDA driver lacks a needed function: %s", dlerror());
    dlclose(cu->lib);
    cu->lib = NULL;
    return 0;
  }
  if ((r = cu->cuInit(0)) != 0 || (r = cu->cuDeviceGet(&cu->device, 0)) != 0 ||
      (r = cu->cuDevicePrimaryCtxRetain(&cu->ctx, cu->device)) != 0) {
    snprintf(why, why_size, "CUDA driver initialisation failed (CUresult %d)", r);
    dlclose(cu->lib);
    cu->lib = NULL;
    return 0;
  }
  if ((r = cu->cuCtxSetCurrent(cu->ctx)) != 0 || (r = cu->cuMemAlloc(&cu->base, sizeof(Arena))) != 0) {
    snprintf(why, why_size, "cuMemAlloc of %zu bytes failed (CUresult %d)", sizeof(Arena), r);
    cu->cuDevicePrimaryCtxRelease(cu->device);
    dlclose(cu->lib);
    cu->lib = NULL;
    return 0;
  }
  return 1;
}

static void cuda_close(Cuda* cu) {
  if (cu->lib == NULL) return;
  cu->cuCtxSynchronize();
  cu->cuMemFree(cu->base);
  cu->cuDevicePrimaryCtxRelease(cu->device);
  /* The library stays loaded: libdds's CUDA runtime may still hold the driver. */
  cu->lib = NULL;
}

/* The pointer dds must see for host arena field `p`: itself on the CPU backend, the same offset
 * in the device arena on the CUDA backend. */
static const Arena* g_host_base;
static const Cuda* g_cuda; /* NULL on the CPU backend */
static void* dptr(const void* p) {
  if (g_cuda == NULL) return (void*)p;
  return (void*)(size_t)(g_cuda->base + (CUdeviceptr)((const char*)p - (const char*)g_host_base));
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* Runs dds_sample on the arena: copies the inputs in and the outputs out on the CUDA backend. */
static dds_status sample_step(dds_sampler* s, Arena* h, const dds_sample_args* args) {
  dds_status st;
  if (g_cuda != NULL && g_cuda->cuMemcpyHtoD(g_cuda->base, h, OUTPUTS_OFFSET) != 0) {
    fprintf(stderr, "dds_demo: cuMemcpyHtoD failed\n");
    return DDS_ERR_CUDA;
  }
  st = dds_sample(s, args, NULL); /* NULL = the legacy default stream */
  if (st != DDS_OK || g_cuda == NULL) return st;
  if (g_cuda->cuMemcpyDtoH((char*)h + OUTPUTS_OFFSET, g_cuda->base + OUTPUTS_OFFSET,
                           sizeof(Arena) - OUTPUTS_OFFSET) != 0 ||
      g_cuda->cuCtxSynchronize() != 0) {
    fprintf(stderr, "dds_demo: cuMemcpyDtoH failed\n");
    return DDS_ERR_CUDA;
  }
  return DDS_OK;
}

static dds_status create_sampler(int32_t backend, dds_sampler** out) {
  dds_sampler_config cfg;
  dds_sampler_config_init(&cfg, sizeof cfg);
  cfg.backend = backend;
  cfg.device = 0;
  cfg.vocab_size = VOCAB;
  cfg.max_rows = MAX_ROWS;
  cfg.max_requests = NREQ;
  return dds_create(&cfg, out);
}

/* One row through the CUDA path, so that a library whose CUDA kernels cannot serve the call
 * (e.g. built before they landed) is detected before the demo starts. */
static dds_status probe(dds_sampler* s, Arena* h) {
  dds_sample_args a;
  memset(h->logits, 0, VOCAB * sizeof(float));
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = 1;
  a.num_requests = 1;
  a.logits = dptr(h->logits);
  a.tokens = (int32_t*)dptr(h->tokens);
  return sample_step(s, h, &a);
}

/* One decode step on the device (or host): dds_sample, then dds_reveal on the same stream, which
 * writes the chosen tokens into the canvas. The arena is small: copied whole both ways. */
static dds_status decode_step(dds_sampler* s, Arena* h, const dds_sample_args* args,
                              const dds_reveal_args* rargs) {
  dds_status st;
  if (g_cuda != NULL && g_cuda->cuMemcpyHtoD(g_cuda->base, h, sizeof(Arena)) != 0) {
    fprintf(stderr, "dds_demo: cuMemcpyHtoD failed\n");
    return DDS_ERR_CUDA;
  }
  st = dds_sample(s, args, NULL);
  if (st != DDS_OK) return st;
  st = dds_reveal(s, rargs, NULL);
  if (st != DDS_OK) {
    fprintf(stderr, "dds_demo: dds_reveal: %s: %s\n", dds_status_string(st), dds_last_error());
    return st;
  }
  if (g_cuda == NULL) return DDS_OK;
  if (g_cuda->cuMemcpyDtoH(h, g_cuda->base, sizeof(Arena)) != 0 || g_cuda->cuCtxSynchronize() != 0) {
    fprintf(stderr, "dds_demo: cuMemcpyDtoH failed\n");
    return DDS_ERR_CUDA;
  }
  return DDS_OK;
}

static void print_canvas(const int* canvas) {
  int i;
  putchar('|');
  for (i = 0; i < CANVAS; ++i) putchar(canvas[i] == MASK ? '_' : kAlphabet[canvas[i]]);
  putchar('|');
}

int main(void) {
  static Arena arena;
  Arena* h = &arena;
  static const char* const kPrompts[NREQ] = {"the ", "a small "};
  int canvas[NREQ][CANVAS];
  int r, i, step, ok = 1, masked_left = 0;
  dds_sampler* sampler = NULL;
  dds_status st;
  Cuda cuda;
  char why[512] = "";
  const char* forced = getenv("DDS_DEMO_BACKEND");
  double sample_total = 0, step_total = 0;

  printf("dds %s demo: masked diffusion over a %d-token character vocabulary (MASK = %d), "
         "%d requests x %d positions, %d steps\n",
         dds_version_string(), VOCAB, MASK, NREQ, CANVAS, STEPS);
  build_model();
  g_host_base = h;

  /* --- choose the backend --- */
  if (forced != NULL && strcmp(forced, "cpu") == 0) {
    snprintf(why, sizeof why, "DDS_DEMO_BACKEND=cpu");
  } else if (!dds_has_cuda()) {
    snprintf(why, sizeof why, "this libdds was built without the CUDA backend");
  } else if ((st = create_sampler(DDS_BACKEND_CUDA, &sampler)) != DDS_OK) {
    snprintf(why, sizeof why, "%s: %s", dds_status_string(st), dds_last_error());
  } else if (!cuda_open(&cuda, why, sizeof why)) {
    dds_destroy(sampler);
    sampler = NULL;
  } else {
    g_cuda = &cuda;
    if ((st = probe(sampler, h)) != DDS_OK) {
      snprintf(why, sizeof why, "a CUDA dds_sample failed: %s: %s", dds_status_string(st),
               dds_last_error());
      dds_destroy(sampler);
      sampler = NULL;
      cuda_close(&cuda);
      g_cuda = NULL;
    }
  }
  if (sampler != NULL) {
    printf("backend: CUDA (device 0; device buffers through the CUDA driver API)\n");
  } else {
    printf("backend: CPU (CUDA not used: %s)\n", why);
    if ((st = create_sampler(DDS_BACKEND_CPU, &sampler)) != DDS_OK) {
      fprintf(stderr, "dds_demo: dds_create: %s: %s\n", dds_status_string(st), dds_last_error());
      return 1;
    }
  }

  /* --- per-request settings (device arrays on the CUDA backend, so a graph could replay) --- */
  h->temperatures[0] = 0.7f, h->top_ps[0] = 0.9f, h->guidance_scales[0] = 0.0f;
  h->temperatures[1] = 0.9f, h->top_ps[1] = 0.95f, h->guidance_scales[1] = 0.5f;
  h->seeds[0] = 1234, h->seeds[1] = 5678;
  h->uncond_row_offsets[0] = -1; /* request 0: no guidance, no unconditional rows */
  h->uncond_row_offsets[1] = 0;  /* request 1: its unconditional rows start at row 0 */
  printf("request 0: T = %.2f, top-p = %.2f, no guidance      prompt \"%s\"\n",
         (double)h->temperatures[0], (double)h->top_ps[0], kPrompts[0]);
  printf("request 1: T = %.2f, top-p = %.2f, guidance g = %.1f  prompt \"%s\"\n",
         (double)h->temperatures[1], (double)h->top_ps[1], (double)h->guidance_scales[1],
         kPrompts[1]);

  for (r = 0; r < NREQ; ++r) {
    size_t n = strlen(kPrompts[r]);
    for (i = 0; i < CANVAS; ++i) canvas[r][i] = i < (int)n ? char_to_token(kPrompts[r][i]) : MASK;
  }

  printf("step  rows  model us     dds us   request 0%*srequest 1\n", CANVAS - 7, "");
  printf("   0     -         -          -   ");
  print_canvas(canvas[0]), putchar(' '), print_canvas(canvas[1]), putchar('\n');

  for (step = 0; step < STEPS; ++step) {
    dds_sample_args a;
    dds_reveal_args ra;
    int rows = 0, urows = 0;
    double t0 = now_us(), t1, t2, t3;

    /* 1. The model: logits for the masked positions only, packed request after request. */
    for (r = 0; r < NREQ; ++r) {
      h->row_offsets[r] = rows;
      for (i = 0; i < CANVAS; ++i) {
        if (canvas[r][i] != MASK) continue;
        h->positions[rows] = i;
        model_cond(canvas[r], i, &h->logits[rows * VOCAB]);
        if (h->uncond_row_offsets[r] >= 0) model_uncond(&h->uncond[urows++ * VOCAB]);
        ++rows;
      }
    }
    h->row_offsets[NREQ] = rows;
    if (rows == 0) break;

    /* 2. One dds_sample call for the whole batch. */
    dds_sample_args_init(&a, sizeof a);
    a.num_rows = rows;
    a.num_requests = NREQ;
    a.row_offsets = (const int32_t*)dptr(h->row_offsets);
    a.positions = (const int32_t*)dptr(h->positions);
    a.logits = dptr(h->logits);
    a.dtype = DDS_DTYPE_F32;
    a.uncond_logits = dptr(h->uncond);
    a.uncond_num_rows = urows;
    a.uncond_row_offsets = (const int32_t*)dptr(h->uncond_row_offsets);
    a.guidance_scales = (const float*)dptr(h->guidance_scales);
    a.temperatures = (const float*)dptr(h->temperatures);
    a.top_ps = (const float*)dptr(h->top_ps);
    a.seeds = (const uint64_t*)dptr(h->seeds);
    a.step = (uint32_t)step; /* part of the random-number counter */
    a.banned_token = MASK;
    a.stats = DDS_STATS_GUIDED; /* rank positions by the guided distribution */
    a.tokens = (int32_t*)dptr(h->tokens);
    a.confidence = (float*)dptr(h->confidence);
    a.request_status = (int32_t*)dptr(h->request_status);
    /* 3. dds_reveal: per request the most confident masked positions, an even schedule
     *    (ceil(masked / steps left)), written into the canvas on the device. */
    for (r = 0; r < NREQ; ++r) {
      h->steps_left[r] = STEPS - step;
      for (i = 0; i < CANVAS; ++i) h->canvas[r * CANVAS + i] = canvas[r][i];
    }
    dds_reveal_args_init(&ra, sizeof ra);
    ra.num_rows = rows;
    ra.num_requests = NREQ;
    ra.row_offsets = (const int32_t*)dptr(h->row_offsets);
    ra.positions = (const int32_t*)dptr(h->positions);
    ra.scores = (const float*)dptr(h->confidence);
    ra.policy = DDS_REVEAL_TOP_N;
    ra.count = 0; /* n = ceil(eligible / steps_left) */
    ra.steps_left = (const int32_t*)dptr(h->steps_left);
    ra.canvas = (int32_t*)dptr(h->canvas);
    ra.canvas_length = CANVAS;
    ra.canvas_stride = CANVAS;
    ra.tokens = (const int32_t*)dptr(h->tokens);
    ra.mask_token = MASK;
    ra.reveal = (uint8_t*)dptr(h->reveal);
    t1 = now_us();
    st = decode_step(sampler, h, &a, &ra);
    t2 = now_us();
    if (st != DDS_OK) {
      fprintf(stderr, "dds_demo: dds_sample: %s: %s\n", dds_status_string(st), dds_last_error());
      ok = 0;
      break;
    }

    for (r = 0; r < NREQ; ++r) {
      if (h->request_status[r] != 0) {
        fprintf(stderr, "dds_demo: request %d flagged 0x%x\n", r, (unsigned)h->request_status[r]);
        ok = 0;
      }
      for (i = 0; i < CANVAS; ++i) {
        const int32_t t = h->canvas[r * CANVAS + i];
        if (t < 0 || t >= VOCAB) {
          fprintf(stderr, "dds_demo: bad token %d\n", (int)t);
          ok = 0;
          canvas[r][i] = 0;
        } else {
          canvas[r][i] = t;
        }
      }
    }
    t3 = now_us();
    sample_total += t2 - t1;
    step_total += t3 - t0;
    printf("%4d  %4d  %8.1f  %9.1f   ", step + 1, rows, t1 - t0, t2 - t1);
    print_canvas(canvas[0]), putchar(' '), print_canvas(canvas[1]), putchar('\n');
  }

  for (r = 0; r < NREQ; ++r)
    for (i = 0; i < CANVAS; ++i) masked_left += canvas[r][i] == MASK;
  if (masked_left != 0) {
    fprintf(stderr, "dds_demo: %d positions still masked\n", masked_left);
    ok = 0;
  }
  printf("%s backend: %d steps, dds_sample + dds_reveal %.1f us per step on average%s (whole step %.1f us)\n",
         g_cuda ? "CUDA" : "CPU", STEPS, sample_total / STEPS,
         g_cuda ? " incl. host<->device copies" : "", step_total / STEPS);
  for (r = 0; r < NREQ; ++r) {
    printf("request %d: \"", r);
    for (i = 0; i < CANVAS; ++i) putchar(kAlphabet[canvas[r][i] == MASK ? 0 : canvas[r][i]]);
    printf("\"\n");
  }
  dds_destroy(sampler);
  if (g_cuda != NULL) cuda_close(&cuda);
  printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
