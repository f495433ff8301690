"""Minimal ctypes access to libdds for the peer benchmark.

The benchmark drives dds through this thin layer (struct layout mirrored from include/dds/dds.h)
so that it runs where only the shared library is built; the `dds` Python package
(bindings/python) is the user-facing API and calls the same entry points.
"""
import ctypes as C
import os

P = C.c_void_p


class SamplerConfig(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("backend", C.c_int32), ("device", C.c_int32),
                ("vocab_size", C.c_int32), ("max_rows", C.c_int32), ("max_requests", C.c_int32),
                ("max_stash_width", C.c_int32), ("flags", C.c_uint32)]


class SampleArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("num_rows", C.c_int32), ("num_requests", C.c_int32),
                ("row_offsets", P), ("positions", P), ("logits", P), ("dtype", C.c_int32),
                ("row_stride", C.c_int64), ("uncond_logits", P), ("uncond_row_stride", C.c_int64),
                ("uncond_num_rows", C.c_int32), ("uncond_row_offsets", P),
                ("guidance_scales", P), ("guidance_scale", C.c_float),
                ("temperatures", P), ("temperature", C.c_float),
                ("top_ks", P), ("top_k", C.c_int32), ("top_ps", P), ("top_p", C.c_float),
                ("min_ps", P), ("min_p", C.c_float), ("seeds", P), ("seed", C.c_uint64),
                ("steps", P), ("step", C.c_uint32), ("banned_token", C.c_int32),
                ("stats", C.c_int32), ("tokens", P), ("logprobs", P), ("argmax", P),
                ("confidence", P), ("margin", P), ("entropy", P), ("probs", P),
                ("probs_dtype", C.c_int32), ("probs_row_stride", C.c_int64),
                ("request_status", P)]


class VerifyArgs(C.Structure):
    """dds_verify_args (include/dds/dds.h)."""
    _fields_ = [("struct_size", C.c_size_t), ("num_requests", C.c_int32),
                ("num_drafts", C.c_int32), ("draft_counts", P), ("draft_tokens", P),
                ("draft_logits", P), ("draft_row_stride", C.c_int64), ("target_logits", P),
                ("target_row_stride", C.c_int64), ("dtype", C.c_int32),
                ("temperatures", P), ("temperature", C.c_float), ("top_ks", P),
                ("top_k", C.c_int32), ("top_ps", P), ("top_p", C.c_float), ("min_ps", P),
                ("min_p", C.c_float), ("seeds", P), ("seed", C.c_uint64), ("steps", P),
                ("step", C.c_uint32), ("banned_token", C.c_int32),
                ("accepted_counts", P), ("out_tokens", P), ("out_logprobs", P),
                ("request_status", P)]


DTYPE = {"float32": 0, "bfloat16": 1, "float16": 2}


class Lib:
    def __init__(self, path=None):
        path = path or os.environ.get("DDS_LIB", "libdds.so")
        self.lib = C.CDLL(path)
        L = self.lib
        L.dds_last_error.restype = C.c_char_p
        L.dds_version_string.restype = C.c_char_p
        for fn in ("dds_sampler_config_init", "dds_sample_args_init"):
            getattr(L, fn).argtypes = [P, C.c_size_t]
        L.dds_create.argtypes = [P, P]
        L.dds_destroy.argtypes = [P]
        L.dds_sample.argtypes = [P, P, P]
        if hasattr(L, "dds_verify_drafts"):
            L.dds_verify_args_init.argtypes = [P, C.c_size_t]
            L.dds_verify_drafts.argtypes = [P, P, P]

    def check(self, st, what):
        if st != 0:
            raise RuntimeError(f"{what}: status {st}: {self.lib.dds_last_error().decode()}")


class Sampler:
    """A CUDA sampler plus a reusable argument struct."""

    def __init__(self, lib, vocab, max_rows, max_requests, device=0, backend=1):
        self.L = lib
        cfg = SamplerConfig()
        lib.check(lib.lib.dds_sampler_config_init(C.byref(cfg), C.sizeof(cfg)), "config_init")
        cfg.backend, cfg.device, cfg.vocab_size = backend, device, vocab
        cfg.max_rows, cfg.max_requests = max_rows, max_requests
        self.h = P()
        lib.check(lib.lib.dds_create(C.byref(cfg), C.byref(self.h)), "dds_create")

    def args(self):
        a = SampleArgs()
        self.L.check(self.L.lib.dds_sample_args_init(C.byref(a), C.sizeof(a)), "args_init")
        return a

    def sample(self, a, stream):
        self.L.check(self.L.lib.dds_sample(self.h, C.byref(a), P(stream)), "dds_sample")

    def verify_args(self):
        a = VerifyArgs()
        self.L.check(self.L.lib.dds_verify_args_init(C.byref(a), C.sizeof(a)), "verify_args_init")
        return a

    def verify(self, a, stream):
        self.L.check(self.L.lib.dds_verify_drafts(self.h, C.byref(a), P(stream)),
                     "dds_verify_drafts")

    def close(self):
        if self.h:
            self.L.lib.dds_destroy(self.h)
            self.h = P()
