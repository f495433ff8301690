"""dds — the discrete diffusion sampler (Python bindings of libdds).

    import numpy as np, dds
    with dds.Sampler(vocab_size=32000) as s:             # backend="cuda" for torch / CuPy
        r = s.sample(logits, temperature=0.8, top_k=50, seed=1, outputs=("tokens", "confidence"))
        r.tokens, r.confidence

The raw SWIG module is dds._dds (every C function, pointers as integers).
"""

import sys

from . import _dds, _sampler
from ._dds import ArgumentError, Error
from ._sampler import (RevealResult, SampleResult, Sampler, StashResult, VerifyResult,
                       has_cuda)
from ._shard import (ShardCall, ShardPlan, concat_all_gather, sample_sharded,
                     torch_all_gather)
from .generate import GenerateResult, generate  # noqa: E402  (dds.generate is the function)

__version__: str = _dds.dds_version_string()
"""Version of the loaded libdds (dds_version_string())."""

version_number: int = _dds.dds_version_number()

# DDS_REQ_* bits of request_status
REQ_BAD_TEMPERATURE: int = _dds.DDS_REQ_BAD_TEMPERATURE
REQ_BAD_GUIDANCE: int = _dds.DDS_REQ_BAD_GUIDANCE
REQ_BAD_TOP_K: int = _dds.DDS_REQ_BAD_TOP_K
REQ_BAD_TOP_P: int = _dds.DDS_REQ_BAD_TOP_P
REQ_BAD_MIN_P: int = _dds.DDS_REQ_BAD_MIN_P
REQ_BAD_UNCOND_ROWS: int = _dds.DDS_REQ_BAD_UNCOND_ROWS
REQ_EMPTY_ROW: int = _dds.DDS_REQ_EMPTY_ROW
REQ_BAD_SLOT: int = _dds.DDS_REQ_BAD_SLOT
REQ_BAD_POLICY: int = getattr(_dds, "DDS_REQ_BAD_POLICY", 256)
REQ_BAD_POSITION: int = getattr(_dds, "DDS_REQ_BAD_POSITION", 512)
REQ_TOO_MANY_ROWS: int = getattr(_dds, "DDS_REQ_TOO_MANY_ROWS", 1024)
REQ_BAD_ROW_OFFSETS: int = getattr(_dds, "DDS_REQ_BAD_ROW_OFFSETS", 2048)
REQ_BAD_DRAFT_COUNT: int = getattr(_dds, "DDS_REQ_BAD_DRAFT_COUNT", 4096)
REQ_BAD_ENTROPY_BOUND: int = _dds.DDS_REQ_BAD_ENTROPY_BOUND
REQ_BAD_TOKEN_ID: int = getattr(_dds, "DDS_REQ_BAD_TOKEN_ID", 16384)
REQ_BAD_NUM_TOKEN_IDS: int = getattr(_dds, "DDS_REQ_BAD_NUM_TOKEN_IDS", 32768)
REQ_BAD_REVEAL_PARAM: int = getattr(_dds, "DDS_REQ_BAD_REVEAL_PARAM", 65536)

__all__ = [
    "ArgumentError", "Error", "RevealResult", "SampleResult", "Sampler", "StashResult",
    "VerifyResult", "has_cuda",
    "ShardCall", "ShardPlan", "sample_sharded", "concat_all_gather", "torch_all_gather",
    "generate", "GenerateResult",
    "__version__", "version_number",
    "REQ_BAD_TEMPERATURE", "REQ_BAD_GUIDANCE", "REQ_BAD_TOP_K", "REQ_BAD_TOP_P", "REQ_BAD_MIN_P",
    "REQ_BAD_UNCOND_ROWS", "REQ_EMPTY_ROW", "REQ_BAD_SLOT", "REQ_BAD_POLICY", "REQ_BAD_POSITION",
    "REQ_TOO_MANY_ROWS", "REQ_BAD_ROW_OFFSETS", "REQ_BAD_DRAFT_COUNT", "REQ_BAD_ENTROPY_BOUND",
    "REQ_BAD_TOKEN_ID", "REQ_BAD_NUM_TOKEN_IDS", "REQ_BAD_REVEAL_PARAM",
]

if "torch" in sys.modules:  # torch first, then dds: torch.ops.dds.* exist from now on
    _sampler.enable_torch()
