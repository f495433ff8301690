/* dds_shard.h compiles as strict C99 (-std=c99 -pedantic -Werror) and links: two simulated ranks
 * sample one row of V = 5 split 3 + 2, with memcpy standing in for the all-gather, and get the
 * unsharded greedy token. */
#include <dds/dds_shard.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  dds_sampler_config cfg;
  dds_sample_args args[2];
  dds_shard_args shard[2];
  dds_shard_plan plan;
  dds_sampler* s = NULL;
  const float logits[5] = {0.0f, 3.0f, 1.0f, 2.0f, 4.5f};
  double record[2][64];   /* 8-byte aligned; one round-0 record is 216 bytes per row */
  double gathered[2 * 64];
  int32_t token[2] = {-1, -1};
  int r, q;
  if (dds_sampler_config_init(&cfg, sizeof cfg) != DDS_OK) return 1;
  cfg.vocab_size = 5;
  if (dds_create(&cfg, &s) != DDS_OK) return 1;
  for (r = 0; r < 2; ++r) {
    if (dds_sample_args_init(&args[r], sizeof args[r]) != DDS_OK) return 1;
    if (dds_shard_args_init(&shard[r], sizeof shard[r]) != DDS_OK) return 1;
    args[r].num_rows = 1;
    args[r].temperature = 0.0f;
    args[r].tokens = &token[r];
    args[r].logits = logits + (r == 0 ? 0 : 3);
    shard[r].rank = r;
    shard[r].world_size = 2;
    shard[r].vocab_offset = r == 0 ? 0 : 3;
    shard[r].vocab_slice = r == 0 ? 3 : 2;
  }
  plan.struct_size = sizeof plan;
  if (dds_sample_shard_plan(s, &args[0], &shard[0], &plan) != DDS_OK) return 1;
  if (plan.gathered_bytes > (int64_t)sizeof gathered) return 1;
  for (q = 0; q < plan.num_rounds; ++q) {
    for (r = 0; r < 2; ++r) {
      shard[r].round = q;
      if (dds_sample_partial(s, &args[r], &shard[r], gathered, record[r], (dds_stream)NULL) !=
          DDS_OK) {
        fprintf(stderr, "partial: %s\n", dds_last_error());
        return 1;
      }
    }
    for (r = 0; r < 2; ++r)
      memcpy((char*)gathered + plan.gathered_offset[q] + r * plan.record_bytes[q], record[r],
             (size_t)plan.record_bytes[q]);
  }
  for (r = 0; r < 2; ++r)
    if (dds_sample_finish(s, &args[r], &shard[r], gathered, (dds_stream)NULL) != DDS_OK) {
      fprintf(stderr, "finish: %s\n", dds_last_error());
      return 1;
    }
  dds_destroy(s);
  if (token[0] != 4 || token[1] != 4) {
    fprintf(stderr, "tokens %d %d, expected 4\n", (int)token[0], (int)token[1]);
    return 1;
  }
  printf("C99 dds_shard.h test: ok (%d rounds, %lld gathered bytes)\n", (int)plan.num_rounds,
         (long long)plan.gathered_bytes);
  return 0;
}
