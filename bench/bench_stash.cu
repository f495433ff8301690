// dds_stash_logprobs scenarios of dds_bench: a hook for the stash work (uses bench_common.h:
// make_pool, time_us, floor_read_us, print_row). Empty until the stash kernels land.
#include "bench_common.h"

void run_stash_bench() {}
