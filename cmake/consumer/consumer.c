/* A minimal downstream program (install test): one greedy sample on the CPU backend. */
#include <dds/dds.h>
#include <stdio.h>

int main(void) {
  const float logits[4] = {0.5f, 2.0f, -1.0f, 1.0f};
  int32_t token = -1;
  dds_sampler_config cfg;
  dds_sample_args args;
  dds_sampler* s = NULL;
  if (dds_version_number() / 1000000 != DDS_VERSION_MAJOR) return 2;
  dds_sampler_config_init(&cfg, sizeof cfg);
  cfg.vocab_size = 4;
  if (dds_create(&cfg, &s) != DDS_OK) {
    fprintf(stderr, "dds_create: %s\n", dds_last_error());
    return 1;
  }
  dds_sample_args_init(&args, sizeof args);
  args.num_rows = 1;
  args.num_requests = 1;
  args.logits = logits;
  args.temperature = 0.0f;
  args.tokens = &token;
  if (dds_sample(s, &args, NULL) != DDS_OK) {
    fprintf(stderr, "dds_sample: %s\n", dds_last_error());
    return 1;
  }
  dds_destroy(s);
  printf("dds %s: token %d\n", dds_version_string(), (int)token);
  return token == 1 ? 0 : 1;
}
