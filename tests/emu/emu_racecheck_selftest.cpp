// The race check's own test (tests/emu/racecheck.sh): small kernels on the emulation, one per
// pattern, each with or without the barrier that makes it correct. Built with ThreadSanitizer,
// every racy form must be reported and no correct form may be, so that the check cannot go
// quietly lenient (say, if the shuffles became synchronisation again) or noisy.
// Usage: emu_racecheck_selftest <pattern> <racy 0|1>; patterns:
//   shfl     lane 0 writes a shared word, a shuffle, lane 1 reads it (fix: __syncwarp)
//   ballot   every lane writes its word, a ballot, each reads its neighbour's (fix: __syncwarp)
//   warps    warp 0 writes, warp 1 reads, a __syncwarp between (fix: __syncthreads)
//   divergent  lanes of a loop with uneven trips append to a shared list through a masked
//              ballot over __activemask() and a shuffle, then lane 0 reads the list after the
//              loop (fix: __syncthreads before the read)
// Prints the value read; a correct form that reads a wrong value exits 1 (the race itself is
// ThreadSanitizer's to report).
#include "cuda_emu_sample.h"
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
EmuBlock* g_blk;
#include <cstdio>
#include <cstring>

static int g_racy = 0;
static int g_out = 0;

static void k_shfl() {
  __shared__ int w;
  const int lane = threadIdx.x % 32;
  if (lane == 0) w = 42;
  const int v = __shfl_sync(0xffffffffu, lane, 0);
  if (!g_racy) __syncwarp();
  if (lane == 1) g_out = w + v;
}

static void k_ballot() {
  __shared__ int w[32];
  const int lane = threadIdx.x % 32;
  w[lane] = lane;
  const unsigned b = __ballot_sync(0xffffffffu, lane & 1);
  if (!g_racy) __syncwarp();
  const int r = w[(lane + 1) % 32] + (int)(b & 1u);
  if (lane == 0) g_out = r;
}

static void k_warps() {
  __shared__ int w;
  if (threadIdx.x == 0) w = 7;
  __syncwarp();
  if (!g_racy) __syncthreads();
  if (threadIdx.x == 32) g_out = w;
}

static void k_divergent() {
  __shared__ int list[64];
  __shared__ int n;
  const int lane = threadIdx.x % 32;
  if (threadIdx.x == 0) n = 0;
  __syncthreads();
  for (int j = lane; j < 45; j += 32) {  // lanes 0..12 take two trips, the others one
    const unsigned act = __activemask();
    const unsigned bal = __ballot_sync(act, true);
    const int leader = __ffs(bal) - 1;
    int base = 0;
    if (lane == leader) base = atomicAdd(&n, __popc(bal));
    base = __shfl_sync(act, base, leader);
    list[base + __popc(bal & ((1u << lane) - 1u))] = j;
  }
  if (!g_racy) __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0;
    for (int i = 0; i < 45; ++i) s += list[i];
    g_out = s;  // 0 + 1 + ... + 44 = 990 when every append landed
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: emu_racecheck_selftest shfl|ballot|warps|divergent 0|1\n");
    return 2;
  }
  g_racy = atoi(argv[2]);
  const char* p = argv[1];
  if (!strcmp(p, "shfl")) emu_launch(1, 32, k_shfl);
  else if (!strcmp(p, "ballot")) emu_launch(1, 32, k_ballot);
  else if (!strcmp(p, "warps")) emu_launch(1, 64, k_warps);
  else if (!strcmp(p, "divergent")) emu_launch(1, 32, k_divergent);
  else {
    fprintf(stderr, "unknown pattern %s\n", p);
    return 2;
  }
  printf("%s racy=%d: read %d\n", p, g_racy, g_out);
  // The correct forms must also compute the right value (the divergent one checks the
  // emulated __activemask() / masked ballot / shuffle: every append lands once).
  const int want = !strcmp(p, "shfl") ? 42 : !strcmp(p, "ballot") ? 1 : !strcmp(p, "warps") ? 7 : 990;
  return g_racy || g_out == want ? 0 : 1;
}
