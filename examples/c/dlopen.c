/*
 * dds_dlopen: uses libdds through dlopen/dlsym only (no link-time dependency), as a plugin host or
 * a language binding loading the library at run time would.
 *
 *   dds_dlopen [path/to/libdds.so.0]     (default: "libdds.so.0", found by the dynamic loader)
 *
 * 1. loads the library and resolves every function it uses by name;
 * 2. checks that the loaded library has the major version this program was compiled against
 *    (dds_version_number() / 1000000 == DDS_VERSION_MAJOR): within one major version the ABI only
 *    grows, so an equal major with any minor is compatible;
 * 3. samples one row once on the CPU backend (greedy, then with temperature 1 and a seed) and
 *    prints the tokens. Exits 0 on success.
 */
#include <dds/dds.h> /* types and macros only: nothing here links against libdds */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int32_t (*version_number_fn)(void);
typedef const char* (*version_string_fn)(void);
typedef const char* (*status_string_fn)(dds_status);
typedef const char* (*last_error_fn)(void);
typedef dds_status (*config_init_fn)(dds_sampler_config*, size_t);
typedef dds_status (*create_fn)(const dds_sampler_config*, dds_sampler**);
typedef dds_status (*destroy_fn)(dds_sampler*);
typedef dds_status (*args_init_fn)(dds_sample_args*, size_t);
typedef dds_status (*sample_fn)(dds_sampler*, const dds_sample_args*, dds_stream);

/* dlsym returns an object pointer; ISO C has no conversion to a function pointer, so copy the
 * bits (POSIX guarantees they are the same). */
static int resolve(void* lib, const char* name, void* fn_ptr, size_t fn_size) {
  void* sym = dlsym(lib, name);
  if (sym == NULL) {
    fprintf(stderr, "dds_dlopen: symbol %s not found: %s\n", name, dlerror());
    return 0;
  }
  memcpy(fn_ptr, &sym, fn_size);
  return 1;
}
#define RESOLVE(lib, name, var) resolve((lib), (name), &(var), sizeof(var))

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "libdds.so.0";
  version_number_fn version_number;
  version_string_fn version_string;
  status_string_fn status_string;
  last_error_fn last_error;
  config_init_fn config_init;
  create_fn create;
  destroy_fn destroy;
  args_init_fn args_init;
  sample_fn sample;
  dds_sampler_config cfg;
  dds_sample_args args;
  dds_sampler* sampler = NULL;
  dds_status st;
  /* One row over a vocabulary of 8: token 5 is the most likely, token 7 is the banned mask. */
  const float logits[8] = {0.1f, -1.0f, 0.7f, 1.5f, -0.3f, 2.5f, 0.0f, 9.0f};
  int32_t greedy = -1, drawn = -1;
  float logprob = 0.0f;
  int32_t loaded, loaded_major;

  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dds_dlopen: dlopen(\"%s\") failed: %s\n", path, dlerror());
    return 1;
  }
  if (!RESOLVE(lib, "dds_version_number", version_number) ||
      !RESOLVE(lib, "dds_version_string", version_string) ||
      !RESOLVE(lib, "dds_status_string", status_string) ||
      !RESOLVE(lib, "dds_last_error", last_error) ||
      !RESOLVE(lib, "dds_sampler_config_init", config_init) ||
      !RESOLVE(lib, "dds_create", create) || !RESOLVE(lib, "dds_destroy", destroy) ||
      !RESOLVE(lib, "dds_sample_args_init", args_init) || !RESOLVE(lib, "dds_sample", sample)) {
    dlclose(lib);
    return 1;
  }

  loaded = version_number();
  loaded_major = loaded / 1000000;
  printf("loaded %s: dds %s (version number %d); compiled against %d\n", path, version_string(),
         (int)loaded, DDS_VERSION_NUMBER);
  if (loaded_major != DDS_VERSION_MAJOR) {
    fprintf(stderr, "dds_dlopen: major version mismatch: library %d, header %d\n",
            (int)loaded_major, DDS_VERSION_MAJOR);
    dlclose(lib);
    return 1;
  }

  /* The *_init functions take sizeof: a newer library accepts this older, shorter struct. */
  config_init(&cfg, sizeof cfg);
  cfg.backend = DDS_BACKEND_CPU;
  cfg.vocab_size = 8;
  cfg.max_rows = 1;
  cfg.max_requests = 1;
  st = create(&cfg, &sampler);
  if (st != DDS_OK) {
    fprintf(stderr, "dds_dlopen: dds_create: %s: %s\n", status_string(st), last_error());
    dlclose(lib);
    return 1;
  }

  args_init(&args, sizeof args);
  args.num_rows = 1;
  args.num_requests = 1;
  args.logits = logits;
  args.banned_token = 7;
  args.temperature = 0.0f; /* greedy */
  args.tokens = &greedy;
  st = sample(sampler, &args, NULL);
  if (st == DDS_OK) {
    args.temperature = 1.0f;
    args.seed = 42;
    args.tokens = &drawn;
    args.logprobs = &logprob;
    st = sample(sampler, &args, NULL);
  }
  if (st != DDS_OK) {
    fprintf(stderr, "dds_dlopen: dds_sample: %s: %s\n", status_string(st), last_error());
    destroy(sampler);
    dlclose(lib);
    return 1;
  }
  destroy(sampler);
  dlclose(lib);

  printf("greedy token %d; sampled token %d (seed 42, T = 1, log-prob %.4f)\n", (int)greedy,
         (int)drawn, (double)logprob);
  if (greedy != 5 || drawn < 0 || drawn >= 7) {
    fprintf(stderr, "dds_dlopen: unexpected tokens (greedy must be 5, sampled in [0, 7))\n");
    return 1;
  }
  printf("ok\n");
  return 0;
}
