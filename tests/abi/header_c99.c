/* The public header compiles as strict C99 (-std=c99 -pedantic -Werror, see tests/CMakeLists.txt)
 * and its declarations link: a tiny C program that samples one row on the CPU backend. */
#include <dds/dds.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  dds_sampler_config cfg;
  dds_sample_args args;
  dds_sampler* s = NULL;
  const float logits[4] = {0.0f, 3.0f, 1.0f, 2.0f};
  int32_t token = -1;
  dds_status st;
  if (dds_version_number() != DDS_VERSION_NUMBER) {
    fprintf(stderr, "version mismatch: %d vs %d\n", (int)dds_version_number(), DDS_VERSION_NUMBER);
    return 1;
  }
  if (dds_sampler_config_init(&cfg, sizeof cfg) != DDS_OK) return 1;
  cfg.backend = DDS_BACKEND_CPU;
  cfg.vocab_size = 4;
  if (dds_create(&cfg, &s) != DDS_OK) {
    fprintf(stderr, "dds_create: %s\n", dds_last_error());
    return 1;
  }
  if (dds_sample_args_init(&args, sizeof args) != DDS_OK) return 1;
  args.num_rows = 1;
  args.logits = logits;
  args.temperature = 0.0f;
  args.tokens = &token;
  st = dds_sample(s, &args, (dds_stream)NULL);
  dds_destroy(s);
  if (st != DDS_OK || token != 1) {
    fprintf(stderr, "dds_sample: %s (%s), token %d\n", dds_status_string(st), dds_last_error(),
            (int)token);
    return 1;
  }
  if (strcmp(dds_status_string(DDS_ERR_CAPACITY), "DDS_ERR_CAPACITY") != 0) return 1;
  printf("C99 header test: ok (token %d, dds %s)\n", (int)token, dds_version_string());
  return 0;
}
