"""The array adapters without a GPU: __cuda_array_interface__ objects, strides, dtypes."""

import numpy as np
import pytest

from dds import _arrays as A


class FakeCuda:
    """A CUDA array as seen through __cuda_array_interface__ (never dereferenced here)."""

    def __init__(self, shape, typestr, strides=None, ptr=0x7F0000001000):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, False), "strides": strides, "version": 3}


def ctx(backend="cuda"):
    return A.CallContext(backend, 0, "cupy", 0, False)


def test_cai_contiguous_and_strided():
    info = A.describe(FakeCuda((3, 5), "<f4"), "x")
    assert info.strides == (5, 1) and info.dtype == "float32" and info.device == -1
    info = A.describe(FakeCuda((3, 5), "<u2", strides=(20, 2)), "x")
    assert info.strides == (10, 1) and info.dtype == "uint16"
    with pytest.raises(ValueError, match="x: strides"):
        A.describe(FakeCuda((3, 5), "<f4", strides=(20, 3)), "x")


def test_matrix_on_cuda_context():
    info, dt, stride = A.matrix(FakeCuda((4, 8), "<f4", strides=(64, 4)), "logits", ctx(), 8,
                                ("float32", "bfloat16", "float16"), None)
    assert dt == "float32" and stride == 16
    _, dt, _ = A.matrix(FakeCuda((4, 8), "<u2"), "logits", ctx(), 8,
                        ("float32", "bfloat16", "float16"), "bf16")
    assert dt == "bfloat16"
    with pytest.raises(TypeError, match="host memory"):
        A.matrix(np.zeros((4, 8), np.float32), "logits", ctx(), 8, ("float32",), None)
    with pytest.raises(TypeError, match="backend is 'cpu'"):
        A.matrix(FakeCuda((4, 8), "<f4"), "logits", ctx("cpu"), 8, ("float32",), None)
    with pytest.raises(ValueError, match="column stride"):
        A.matrix(FakeCuda((4, 8), "<f4", strides=(4, 16)), "logits", ctx(), 8, ("float32",),
                 None)


def test_device_vectors_need_exact_dtype():
    p, info = A.vector(FakeCuda((3,), "<u8"), "seed", ctx(), "uint64", 3)
    assert p == 0x7F0000001000
    A.vector(FakeCuda((3,), "<i8"), "seed", ctx(), "uint64", 3, ("int64",))
    with pytest.raises(TypeError, match="seed: device array dtype"):
        A.vector(FakeCuda((3,), "<f8"), "seed", ctx(), "uint64", 3)
    with pytest.raises(ValueError, match="seed: has 2 elements"):
        A.vector(FakeCuda((2,), "<u8"), "seed", ctx(), "uint64", 3)
    with pytest.raises(ValueError, match="contiguous"):
        A.vector(FakeCuda((3,), "<u8", strides=(16,)), "seed", ctx(), "uint64", 3)


def test_host_convert_rules():
    assert A.host_convert([1, 2 ** 63 + 5], "seed", "uint64").tolist() == [1, 2 ** 63 + 5]
    with pytest.raises(TypeError, match="top_k"):
        A.host_convert([1.5], "top_k", "int32")
    with pytest.raises(ValueError, match="step"):
        A.host_convert(np.array([-1]), "step", "uint32")
    assert A.host_convert([True, False], "keep", "uint8").tolist() == [1, 0]
    assert A.host_convert((0.5, 1), "top_p", "float32").dtype == np.float32


def test_dtype_names():
    assert A.dtype_name("bf16") == A.dtype_name("bfloat16") == "bfloat16"
    assert A.dtype_name(np.float16) == "float16"
    assert A.dtype_name("torch.float32") == "float32"
    with pytest.raises(TypeError):
        A.dtype_name("int8")


def test_stream_argument_forms():
    class S:
        cuda_stream = 1234

    class C:
        ptr = 99

    assert A.resolve_stream(S(), "torch", 0) == (1234, True)
    assert A.resolve_stream(C(), "cupy", 0) == (99, True)
    assert A.resolve_stream(7, "cuda", 0) == (7, True)
    assert A.resolve_stream(None, "cuda", 0) == (0, False)
    with pytest.raises(TypeError, match="stream"):
        A.resolve_stream("fast", "torch", 0)


class OnlyDLPack:
    """An array known to dds only through the DLPack protocol."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, *args, **kwargs):
        return self._a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_host_array_on_cpu_backend():
    import dds

    x = np.random.default_rng(1).standard_normal((3, 10)).astype(np.float32)
    with dds.Sampler(vocab_size=10) as s:
        a = s.sample(OnlyDLPack(x), seed=[1, 2, 3], outputs=("tokens", "entropy"))
        b = s.sample(x, seed=[1, 2, 3], outputs=("tokens", "entropy"))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.entropy, b.entropy)
