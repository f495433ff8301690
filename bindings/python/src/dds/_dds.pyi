"""Type stub of the raw SWIG module dds._dds (generated from include/dds/dds.h and
include/dds/dds_shard.h by SWIG).

Every array pointer is an int (uintptr), every dds_stream an int (cudaStream_t, 0 = default),
functions returning dds_status return None or raise Error / ArgumentError. Struct fields mirror
the C structs; a new struct holds the defaults of its dds_*_init function.
"""

from typing import Any, Optional, Tuple

class Error(RuntimeError):
    status: int
    status_name: str

class ArgumentError(Error, ValueError): ...

class _Struct:
    struct_size: int
    def __getattr__(self, name: str) -> Any: ...
    def __setattr__(self, name: str, value: Any) -> None: ...

class dds_sampler_config(_Struct):
    backend: int
    device: int
    vocab_size: int
    max_rows: int
    max_requests: int
    max_stash_width: int
    flags: int
    num_threads: int
    def __init__(self) -> None: ...

class dds_sample_args(_Struct):
    num_rows: int
    num_requests: int
    row_offsets: int
    positions: int
    logits: int
    dtype: int
    row_stride: int
    uncond_logits: int
    uncond_row_stride: int
    uncond_num_rows: int
    uncond_row_offsets: int
    guidance_scales: int
    guidance_scale: float
    temperatures: int
    temperature: float
    top_ks: int
    top_k: int
    top_ps: int
    top_p: float
    min_ps: int
    min_p: float
    seeds: int
    seed: int
    steps: int
    step: int
    banned_token: int
    stats: int
    tokens: int
    logprobs: int
    argmax: int
    confidence: int
    margin: int
    entropy: int
    probs: int
    probs_dtype: int
    probs_row_stride: int
    request_status: int
    allowed_token_masks: int
    allowed_mask_stride: int
    def __init__(self) -> None: ...
    def reset(self) -> None: ...  # back to the dds_sample_args_init defaults

class dds_stash_args(_Struct):
    num_rows: int
    num_requests: int
    row_offsets: int
    logits: int
    dtype: int
    row_stride: int
    keep: int
    slots: int
    num_valid: int
    temperatures: int
    temperature: float
    committed_tokens: int
    token_ids: int
    num_token_ids: int
    num_top: int
    logits_mode: int
    num_slots: int
    rows_per_slot: int
    out_token_ids: int
    out_logprobs: int
    out_ranks: int
    request_status: int
    allowed_token_masks: int
    allowed_mask_stride: int
    def __init__(self) -> None: ...

class dds_reveal_args(_Struct):
    num_rows: int
    num_requests: int
    row_offsets: int
    positions: int
    scores: int
    eligible: int
    policies: int
    policy: int
    counts: int
    count: int
    steps_left: int
    thresholds: int
    threshold: float
    factors: int
    factor: float
    position_temperatures: int
    position_temperature: float
    seeds: int
    seed: int
    steps: int
    step: int
    canvas: int
    canvas_stride: int
    canvas_length: int
    tokens: int
    mask_token: int
    eos_token: int
    reveal: int
    num_revealed: int
    finished: int
    request_status: int
    entropy_bounds: int
    entropy_bound: float
    def __init__(self) -> None: ...

class dds_verify_args(_Struct):
    num_requests: int
    num_drafts: int
    draft_counts: int
    draft_tokens: int
    draft_logits: int
    draft_row_stride: int
    target_logits: int
    target_row_stride: int
    dtype: int
    temperatures: int
    temperature: float
    top_ks: int
    top_k: int
    top_ps: int
    top_p: float
    min_ps: int
    min_p: float
    seeds: int
    seed: int
    steps: int
    step: int
    banned_token: int
    accepted_counts: int
    out_tokens: int
    out_logprobs: int
    request_status: int
    allowed_token_masks: int
    allowed_mask_stride: int
    def __init__(self) -> None: ...

class dds_shard_args(_Struct):
    rank: int
    world_size: int
    vocab_offset: int
    vocab_slice: int
    max_top_k: int
    round: int
    def __init__(self) -> None: ...  # dds_shard_args_init defaults

class dds_shard_plan(_Struct):
    num_rounds: int
    world_size: int
    round_kind: Tuple[int, ...]  # DDS_SHARD_MAX_ROUNDS entries, read-only
    row_bytes: Tuple[int, ...]
    record_bytes: Tuple[int, ...]
    gathered_offset: Tuple[int, ...]
    gathered_bytes: int
    def __init__(self) -> None: ...  # struct_size set, the rest zero

class _SamplerHandle: ...  # SWIG pointer to the opaque struct dds_sampler

def dds_version_number() -> int: ...
def dds_version_string() -> str: ...
def dds_status_string(status: int) -> str: ...
def dds_last_error() -> str: ...
def dds_has_cuda() -> int: ...
def dds_sampler_config_init(config: dds_sampler_config, struct_size: int) -> None: ...
def dds_sample_args_init(args: dds_sample_args, struct_size: int) -> None: ...
def dds_stash_args_init(args: dds_stash_args, struct_size: int) -> None: ...
def dds_reveal_args_init(args: dds_reveal_args, struct_size: int) -> None: ...
def dds_verify_args_init(args: dds_verify_args, struct_size: int) -> None: ...
def dds_create(config: dds_sampler_config) -> _SamplerHandle: ...
def dds_destroy(sampler: Optional[_SamplerHandle]) -> None: ...
def dds_sampler_backend(sampler: _SamplerHandle) -> int: ...
def dds_sample(sampler: _SamplerHandle, args: dds_sample_args, stream: Optional[int]) -> None: ...
def dds_stash_logprobs(sampler: _SamplerHandle, args: dds_stash_args,
                       stream: Optional[int]) -> None: ...
def dds_reveal(sampler: _SamplerHandle, args: dds_reveal_args, stream: Optional[int]) -> None: ...
def dds_verify_drafts(sampler: _SamplerHandle, args: dds_verify_args,
                      stream: Optional[int]) -> None: ...
def dds_py_address(obj: Any) -> int: ...  # first element of a buffer-protocol object
# Sampler.sample's planned fast path (dds/_sample.py make_plan; see src/dds.i)
def dds_py_plan_new(handle: _SamplerHandle, tmpl: dds_sample_args, max_rows: int,
                    max_requests: int, slots: tuple, allocs: tuple, stream_fn: Any,
                    stream_dev: Any, stream_const: Any) -> Any: ...
def dds_py_sample_planned(plans: list, vals: tuple) -> Optional[tuple]: ...
def dds_py_sizeof_sampler_config() -> int: ...
def dds_py_sizeof_sample_args() -> int: ...
def dds_py_sizeof_stash_args() -> int: ...
def dds_shard_args_init(shard: dds_shard_args, struct_size: int) -> None: ...
def dds_sample_shard_plan(sampler: _SamplerHandle, args: dds_sample_args, shard: dds_shard_args,
                          plan: dds_shard_plan) -> None: ...
def dds_sample_record_bytes(sampler: _SamplerHandle, args: dds_sample_args,
                            shard: dds_shard_args, round: int) -> int: ...
def dds_sample_partial(sampler: _SamplerHandle, args: dds_sample_args, shard: dds_shard_args,
                       gathered: Optional[int], record_out: Optional[int],
                       stream: Optional[int]) -> None: ...
def dds_sample_finish(sampler: _SamplerHandle, args: dds_sample_args, shard: dds_shard_args,
                      gathered: Optional[int], stream: Optional[int]) -> None: ...
def dds_py_sizeof_shard_args() -> int: ...
def dds_py_sizeof_shard_plan() -> int: ...

DDS_VERSION_MAJOR: int
DDS_VERSION_MINOR: int
DDS_VERSION_PATCH: int
DDS_VERSION_NUMBER: int
DDS_OK: int
DDS_ERR_INVALID_ARGUMENT: int
DDS_ERR_NULL_POINTER: int
DDS_ERR_CAPACITY: int
DDS_ERR_UNSUPPORTED: int
DDS_ERR_NO_DEVICE: int
DDS_ERR_CUDA: int
DDS_ERR_OUT_OF_MEMORY: int
DDS_ERR_STRUCT_SIZE: int
DDS_ERR_INVALID_VALUE: int
DDS_ERR_BUSY: int
DDS_ERR_INTERNAL: int
DDS_BACKEND_CPU: int
DDS_BACKEND_CUDA: int
DDS_DTYPE_F32: int
DDS_DTYPE_BF16: int
DDS_DTYPE_F16: int
DDS_STATS_PROCESSED: int
DDS_STATS_GUIDED: int
DDS_FLAG_DEBUG_CHECKS: int
DDS_REQ_BAD_TEMPERATURE: int
DDS_REQ_BAD_GUIDANCE: int
DDS_REQ_BAD_TOP_K: int
DDS_REQ_BAD_TOP_P: int
DDS_REQ_BAD_MIN_P: int
DDS_REQ_BAD_UNCOND_ROWS: int
DDS_REQ_EMPTY_ROW: int
DDS_REQ_BAD_SLOT: int
DDS_REQ_BAD_POLICY: int
DDS_REQ_BAD_POSITION: int
DDS_REQ_TOO_MANY_ROWS: int
DDS_REQ_BAD_ROW_OFFSETS: int
DDS_REQ_BAD_DRAFT_COUNT: int
DDS_REQ_BAD_ENTROPY_BOUND: int
DDS_REQ_BAD_TOKEN_ID: int
DDS_REQ_BAD_NUM_TOKEN_IDS: int
DDS_REQ_BAD_REVEAL_PARAM: int
DDS_REVEAL_TOP_N: int
DDS_REVEAL_THRESHOLD: int
DDS_REVEAL_FACTOR: int
DDS_REVEAL_RANDOM: int
DDS_REVEAL_ENTROPY_BOUND: int
DDS_SHARD_MAX_TOP_K: int
DDS_SHARD_MAX_WORLD_SIZE: int
DDS_SHARD_MAX_ROUNDS: int
DDS_SHARD_ROUND_STATS: int
DDS_SHARD_ROUND_RADIX: int
DDS_SHARD_ROUND_KEPT: int
def __getattr__(name: str) -> Any: ...
