import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import dds  # noqa: E402


def pytest_report_header(config):
    return [f"dds {dds.__version__} from {os.path.dirname(dds.__file__)}; "
            f"libdds has CUDA backend: {dds.has_cuda()}"]


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def bf16_bits(x):
    """float32 values -> bfloat16 bit patterns (round to nearest even), as uint16."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, np.float32))
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = 0x7FC0
    return r


def bf16_to_f32(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)
