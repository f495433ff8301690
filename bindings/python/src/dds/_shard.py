"""Vocabulary-parallel sampling (include/dds/dds_shard.h, docs/vocab_parallel.md).

Each of R ranks holds logits [rows, vocab_slice] for the global columns
[vocab_offset, vocab_offset + vocab_slice) of the sampler's vocab_size. Per round every rank
writes a small record (dds_sample_partial), the caller all-gathers the records rank-major into
one byte buffer, and after the last round every rank finishes every row (dds_sample_finish):
the tokens are those of Sampler.sample on the unsharded rows, the statistics agree within 1e-6
relative.
"""

from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _dds
from ._arrays import CallContext, check_device, describe

MAX_TOP_K: int = _dds.DDS_SHARD_MAX_TOP_K
MAX_WORLD_SIZE: int = _dds.DDS_SHARD_MAX_WORLD_SIZE
MAX_ROUNDS: int = _dds.DDS_SHARD_MAX_ROUNDS

ROUND_KINDS = {_dds.DDS_SHARD_ROUND_STATS: "stats", _dds.DDS_SHARD_ROUND_RADIX: "radix",
               _dds.DDS_SHARD_ROUND_KEPT: "kept"}

AllGather = Callable[[Any, List[Any]], Any]


class ShardPlan(NamedTuple):
    """dds_shard_plan: the rounds of one sharded call and its buffer sizes (bytes). The tuples
    hold num_rounds entries."""

    num_rounds: int
    world_size: int
    round_kind: Tuple[str, ...]  # "stats" | "radix" | "kept"
    row_bytes: Tuple[int, ...]  # record bytes per row of each round
    record_bytes: Tuple[int, ...]  # one rank's record of each round (num_rows * row_bytes)
    gathered_offset: Tuple[int, ...]  # where round q's gathered records start in `gathered`
    gathered_bytes: int  # size of the whole gathered buffer

    @property
    def max_record_bytes(self) -> int:
        """Size of a record buffer that serves every round."""
        return max(self.record_bytes) if self.record_bytes else 0

    def gathered_slice(self, round: int) -> slice:
        """The bytes of `gathered` that round `round`'s all-gather fills (rank-major)."""
        off = self.gathered_offset[round]
        return slice(off, off + self.world_size * self.record_bytes[round])


def _int(value: Any, name: str, lo: int, hi: int) -> int:
    from ._sampler import _check_int

    return _check_int(value, name, lo, hi)


def _bytes_view(obj: Any, name: str, ctx: CallContext, need: int, writable: bool) -> int:
    """Pointer of a caller's byte buffer: 1-D, contiguous, uint8 / int8, >= need bytes."""
    info = describe(obj, name)
    if info is None:
        raise TypeError(f"{name}: expected a 1-D uint8 array (numpy / torch / CuPy), got "
                        f"{type(obj).__name__}")
    check_device(info, name, ctx)
    if info.dtype not in ("uint8", "int8"):
        raise TypeError(f"{name}: dtype must be uint8, got {info.dtype}")
    if not info.is_contiguous_1d():
        raise ValueError(f"{name}: expected a contiguous 1-D byte array, got shape "
                         f"{info.shape} strides {info.strides}")
    if info.shape[0] < need:
        raise ValueError(f"{name}: has {info.shape[0]} bytes, needs {need}")
    if need and info.ptr % 8:
        raise ValueError(f"{name}: address {info.ptr:#x} is not aligned to 8 bytes")
    if writable and info.lib == "numpy" and not info.obj.flags.writeable:
        raise ValueError(f"{name}: array is read-only")
    return info.ptr


class ShardCall:
    """One rank's sharded sample call: the dds_sample_args (built once, like Sampler.sample's)
    and the dds_shard_args, the plan, and the outputs that finish() writes. Made by
    Sampler.shard_call(); drive it with partial() per round and finish() at the end, or hand it
    to dds.sample_sharded()."""

    def __init__(self, sampler: Any, logits: Any, *, rank: int = 0, world_size: int = 1,
                 vocab_offset: int = 0, max_top_k: int = 64, **sample_kwargs: Any) -> None:
        self.sampler = sampler
        sampler._live()
        info = describe(logits, "logits")
        if info is None:
            raise TypeError(f"logits: expected a 2-D array (this rank's vocabulary slice), got "
                            f"{type(logits).__name__}")
        if len(info.shape) != 2:
            raise ValueError(f"logits: expected a 2-D array [rows, vocab_slice], got shape "
                             f"{info.shape}")
        V = sampler.vocab_size
        self.world_size = _int(world_size, "world_size", 1, MAX_WORLD_SIZE)
        self.rank = _int(rank, "rank", 0, self.world_size - 1)
        self.vocab_offset = _int(vocab_offset, "vocab_offset", 0, V - 1)
        self.vocab_slice = int(info.shape[1])
        if self.vocab_slice < 1:
            raise ValueError("logits: the vocabulary slice has no columns (vocab_slice >= 1)")
        if self.vocab_offset + self.vocab_slice > V:
            raise ValueError(f"logits: columns [{self.vocab_offset}, "
                             f"{self.vocab_offset + self.vocab_slice}) run past the sampler's "
                             f"vocab_size {V} (vocab_offset + vocab_slice <= vocab_size)")
        self.max_top_k = _int(max_top_k, "max_top_k", 0, MAX_TOP_K)
        self.args, self._res, self.ctx = sampler._sample_args(self.vocab_slice, logits,
                                                              sample_kwargs)
        sh = _dds.dds_shard_args()
        sh.rank = self.rank
        sh.world_size = self.world_size
        sh.vocab_offset = self.vocab_offset
        sh.vocab_slice = self.vocab_slice
        sh.max_top_k = self.max_top_k
        self.shard = sh
        p = _dds.dds_shard_plan()
        with sampler._lock:
            _dds.dds_sample_shard_plan(sampler._live(), self.args, sh, p)
        n = int(p.num_rounds)
        self.plan = ShardPlan(n, int(p.world_size),
                              tuple(ROUND_KINDS.get(k, str(k)) for k in p.round_kind[:n]),
                              tuple(p.row_bytes[:n]), tuple(p.record_bytes[:n]),
                              tuple(p.gathered_offset[:n]), int(p.gathered_bytes))
        self._finished = False

    # -- buffers ---------------------------------------------------------------------------------
    def _empty_bytes(self, n: int) -> Any:
        if self.ctx.lib == "numpy":  # 8-byte aligned
            return np.zeros((n + 7) // 8, np.uint64).view(np.uint8)[:n]
        return self.ctx.empty((n,), "uint8", fill=0)

    def new_gathered(self) -> Any:
        """A zeroed gathered buffer (plan.gathered_bytes uint8) of the logits' library."""
        return self._empty_bytes(self.plan.gathered_bytes)

    def new_record(self) -> Any:
        """A record buffer (plan.max_record_bytes uint8) that serves every round."""
        return self._empty_bytes(self.plan.max_record_bytes)

    def record_bytes(self, round: int) -> int:
        """dds_sample_record_bytes: this rank's record size of round `round`."""
        q = _int(round, "round", 0, max(self.plan.num_rounds - 1, 0))
        with self.sampler._lock:
            return int(_dds.dds_sample_record_bytes(self.sampler._live(), self.args, self.shard,
                                                    q))

    # -- rounds ----------------------------------------------------------------------------------
    def partial(self, gathered: Any, record_out: Any, round: int) -> Any:
        """dds_sample_partial of round `round`: writes this rank's record (its first
        plan.record_bytes[round] bytes) into record_out and returns that view. `gathered` holds
        the all-gathered records of the earlier rounds (may be None for round 0)."""
        q = _int(round, "round", 0, self.plan.num_rounds - 1)
        n = self.plan.record_bytes[q]
        rptr = _bytes_view(record_out, "record_out", self.ctx, n, True)
        gptr = 0
        if gathered is not None:
            gptr = _bytes_view(gathered, "gathered", self.ctx, self.plan.gathered_offset[q], False)
        elif q > 0:
            raise ValueError(f"gathered: round {q} needs the all-gathered records of the earlier "
                             "rounds (got None)")
        self.shard.round = q
        with self.sampler._lock:
            _dds.dds_sample_partial(self.sampler._live(), self.args, self.shard, gptr, rptr,
                                    self.ctx.stream)
        return record_out[:n]

    def finish(self, gathered: Any) -> Any:
        """dds_sample_finish: writes the outputs (whole rows, identical on every rank; probs:
        this rank's slice) from the records of every round; returns the SampleResult."""
        from ._sampler import SampleResult

        gptr = _bytes_view(gathered, "gathered", self.ctx, self.plan.gathered_bytes, False)
        with self.sampler._lock:
            _dds.dds_sample_finish(self.sampler._live(), self.args, self.shard, gptr,
                                   self.ctx.stream)
        self._finished = True
        self.ctx.keep.clear()
        return SampleResult(**self._res)


def _copy_into(dst: Any, src: Any) -> None:
    if hasattr(dst, "copy_"):  # torch
        dst.copy_(src)
    else:
        dst[...] = src


def torch_all_gather(group: Any = None) -> AllGather:
    """An all_gather for dds.sample_sharded over torch.distributed: one local rank, its record
    gathered with all_gather_into_tensor into the round's segment of `gathered` (rank-major,
    rank = the rank within `group`)."""

    def gather(out: Any, records: List[Any]) -> None:
        import torch.distributed as dist

        if len(records) != 1:
            raise ValueError("torch_all_gather: one local rank per process")
        dist.all_gather_into_tensor(out, records[0], group=group)

    return gather


def concat_all_gather(out: Any, records: List[Any]) -> None:
    """The all_gather of ranks simulated in one process: the records concatenated rank-major."""
    off = 0
    for r in records:
        n = int(r.shape[0])
        _copy_into(out[off:off + n], r)
        off += n
    if off != int(out.shape[0]):
        raise ValueError(f"all_gather: the records hold {off} bytes, the round needs "
                         f"{int(out.shape[0])}")


def sample_sharded(samplers: Any, slices: Any, *, all_gather: Optional[AllGather] = None,
                   rank: Optional[int] = None, world_size: Optional[int] = None,
                   vocab_offset: Optional[int] = None,
                   vocab_offsets: Optional[Sequence[int]] = None,
                   uncond_slices: Any = None, max_top_k: int = 64,
                   **sample_kwargs: Any) -> Any:
    """Runs every round of a vocabulary-parallel sample call with a caller-provided all-gather.

    One rank per process (torch.distributed): `slices` is this rank's logits slice [rows,
    vocab_slice], `samplers` its Sampler, `rank` / `world_size` / `vocab_offset` its place;
    returns its SampleResult (tokens etc. identical on every rank).

    Ranks simulated in one process: `slices` is a list of the R ranks' slices (rank i =
    slices[i]; `vocab_offsets` defaults to their cumulative widths), `samplers` one Sampler or
    a list of R; `uncond_slices` the matching list for guidance; returns a list of R
    SampleResults. The local ranks share one gathered buffer.

    all_gather(out, records): fills `out` (the round's segment of the gathered byte buffer,
    world_size * record bytes) with the records of every rank, rank-major; `records` lists the
    local ranks' records (uint8 arrays) of the round. It may instead return the gathered bytes,
    which are copied into `out`. Default: dds.concat_all_gather (simulated ranks). For
    torch.distributed: dds.torch_all_gather(group). Other keyword arguments are those of
    Sampler.sample (the same on every rank; out_probs is per rank).
    """
    if all_gather is None:
        all_gather = concat_all_gather
    if not callable(all_gather):
        raise TypeError(f"all_gather: expected a callable (out, records), got "
                        f"{type(all_gather).__name__}")
    local = isinstance(slices, (list, tuple))
    if local:
        R = len(slices)
        if R < 1:
            raise ValueError("slices: no rank given")
        ws = R if world_size is None else world_size
        if ws != R:
            raise ValueError(f"world_size: {ws} differs from the {R} slices given (simulated "
                             "ranks: one slice per rank)")
        if rank is not None or vocab_offset is not None:
            raise ValueError("rank: with a list of slices the ranks are their indices; pass "
                             "vocab_offsets (not rank / vocab_offset)")
        widths = []
        for i, x in enumerate(slices):
            info = describe(x, f"slices[{i}]")
            if info is None or len(info.shape) != 2:
                raise TypeError(f"slices[{i}]: expected a 2-D array [rows, vocab_slice]")
            widths.append(int(info.shape[1]))
        if vocab_offsets is None:
            offs = [sum(widths[:i]) for i in range(R)]
        else:
            offs = list(vocab_offsets)
            if len(offs) != R:
                raise ValueError(f"vocab_offsets: has {len(offs)} entries, expected {R}")
        spans = sorted(zip(offs, widths))
        end = 0
        for o, w in spans:
            if o != end:
                raise ValueError(f"vocab_offsets: the slices (offsets {offs}, widths {widths}) "
                                 f"do not partition [0, vocab_size): a slice starts at {o}, "
                                 f"expected {end}")
            end = o + w
        V = (samplers[0] if isinstance(samplers, (list, tuple)) and samplers
             else samplers).vocab_size
        if end != V:
            raise ValueError(f"slices: the slices cover [0, {end}), not [0, vocab_size = {V})")
        if isinstance(samplers, (list, tuple)):
            if len(samplers) != R:
                raise ValueError(f"samplers: has {len(samplers)} samplers for {R} slices")
            sams = list(samplers)
        else:
            sams = [samplers] * R
        if uncond_slices is not None:
            if not isinstance(uncond_slices, (list, tuple)) or len(uncond_slices) != R:
                raise ValueError(f"uncond_slices: expected a list of {R} slices (one per rank)")
        ranks = list(range(R))
        slice_list = list(slices)
        uncs = list(uncond_slices) if uncond_slices is not None else [None] * R
    else:
        if vocab_offsets is not None:
            raise ValueError("vocab_offsets: only with a list of slices (use vocab_offset)")
        ws = 1 if world_size is None else world_size
        if rank is None:
            if ws != 1:
                raise ValueError("rank: required when world_size > 1")
            rank = 0
        if vocab_offset is None:
            if ws != 1:
                raise ValueError("vocab_offset: required when world_size > 1")
            vocab_offset = 0
        if isinstance(samplers, (list, tuple)):
            raise TypeError("samplers: one Sampler for one slice")
        ranks, offs, sams, slice_list = [rank], [vocab_offset], [samplers], [slices]
        uncs = [uncond_slices]
    if "uncond_logits" in sample_kwargs:
        raise TypeError("uncond_logits: pass uncond_slices (each rank's slice of the uncond "
                        "logits)")
    calls = []
    for i, (rk, off, sam, x, u) in enumerate(zip(ranks, offs, sams, slice_list, uncs)):
        kw = dict(sample_kwargs)
        if u is not None:
            kw["uncond_logits"] = u
        calls.append(ShardCall(sam, x, rank=rk, world_size=ws, vocab_offset=off,
                               max_top_k=max_top_k, **kw))
    plan = calls[0].plan
    for c in calls[1:]:
        if c.plan != plan:
            raise ValueError(f"slices: rank {c.rank}'s plan {c.plan} differs from rank "
                             f"{calls[0].rank}'s {plan} (every rank must pass the same "
                             "per-request values and rows)")
    gathered = calls[0].new_gathered()
    records = [c.new_record() for c in calls]
    for q in range(plan.num_rounds):
        recs = [c.partial(gathered, rec, q) for c, rec in zip(calls, records)]
        seg = gathered[plan.gathered_slice(q)]
        got = all_gather(seg, recs)
        if got is not None and got is not seg:
            _copy_into(seg, got)
    results = [c.finish(gathered) for c in calls]
    return results if local else results[0]
