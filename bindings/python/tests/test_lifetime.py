"""Sampler lifetime: close, context manager, use after close, no leak over 1e4 cycles."""

import gc
import os

import numpy as np
import pytest

import dds


def rss_kib():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def test_use_after_close_raises():
    s = dds.Sampler(vocab_size=4)
    x = np.zeros((2, 4), np.float32)
    s.sample(x)
    s.close()
    assert s.closed
    s.close()  # idempotent
    with pytest.raises(dds.Error, match="closed"):
        s.sample(x)
    with pytest.raises(dds.Error, match="closed"):
        s.stash_logprobs(x)
    with pytest.raises(dds.Error, match="closed"):
        with s:
            pass
    assert "closed" in repr(s)


def test_context_manager_closes():
    with dds.Sampler(vocab_size=4) as s:
        assert not s.closed
    assert s.closed


def test_exception_inside_with_still_closes():
    with pytest.raises(RuntimeError):
        with dds.Sampler(vocab_size=4) as s:
            raise RuntimeError("boom")
    assert s.closed


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
def test_no_leak_over_10k_create_destroy_cycles():
    x = np.zeros((3, 64), np.float32)

    def cycle(n):
        for i in range(n):
            s = dds.Sampler(vocab_size=64, max_rows=64, max_requests=8)
            if i % 10 == 0:
                s.sample(x, seed=i, outputs=("tokens", "logprobs"))
            if i % 2:
                s.close()
            else:
                del s  # __del__ closes
        gc.collect()

    cycle(500)  # warm up allocators and caches
    before = rss_kib()
    cycle(10_000)
    growth = rss_kib() - before
    assert growth < 2048, f"RSS grew by {growth} KiB over 1e4 create/destroy cycles"


def test_failed_create_leaves_nothing_to_close():
    with pytest.raises(ValueError):
        dds.Sampler(vocab_size=0)
