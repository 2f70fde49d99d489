"""The batch marker codec: BATCH START (0x02) and BATCH END (0x03), PROTOCOL.md "Batch markers (format `batch`)".

A batch record's key is a kmq key whose offset is the base offset `B`, the smallest of its set; the value holds the set
as runs of consecutive offsets, each run's start given as a gap from the end of the previous one. Here a set is a
list of absolute `(start, length)` runs, ascending and disjoint with at least one offset between two runs.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from kmq.errors import MarkerDecodeError
from kmq.markers import _describe

BATCH_START_TYPE = 2
BATCH_END_TYPE = 3
MAX_RUNS = 100_000
MAX_OFFSETS = 1_000_000
_START_HEAD = struct.Struct(">bqi")  # type, redeliver_after_ms, n runs
_END_HEAD = struct.Struct(">bi")  # type, n runs
_RUN_SIZE = 8
_INT64_MAX = 2**63 - 1
Run = tuple[int, int]  # (first offset, length)


@dataclass(frozen=True, slots=True)
class BatchStart:
    """Every offset of `runs` was handed to a worker; redeliver each unless an END comes within the duration."""

    redeliver_after_ms: int
    runs: tuple[Run, ...]

    @property
    def base_offset(self) -> int:
        return self.runs[0][0]

    def encode(self) -> bytes:
        return _START_HEAD.pack(BATCH_START_TYPE, self.redeliver_after_ms, len(self.runs)) + _encode_runs(self.runs)


@dataclass(frozen=True, slots=True)
class BatchEnd:
    """Every offset of `runs` was processed (or dead-lettered): never redeliver them."""

    runs: tuple[Run, ...]

    @property
    def base_offset(self) -> int:
        return self.runs[0][0]

    def encode(self) -> bytes:
        return _END_HEAD.pack(BATCH_END_TYPE, len(self.runs)) + _encode_runs(self.runs)


BatchMarker = BatchStart | BatchEnd


def is_batch_value(value: bytes | None) -> bool:
    """True when the value's type byte is a batch marker's (it may still break a rule: decode to know)."""
    return value is not None and len(value) > 0 and value[0] in (BATCH_START_TYPE, BATCH_END_TYPE)


def decode_batch_marker(base_offset: int, value: bytes | None) -> BatchMarker:
    """Decode a batch marker value whose key carries `base_offset`; any rule broken raises `MarkerDecodeError`."""
    if value is None or not value:
        raise MarkerDecodeError(f"batch marker value is {_describe(value)}")
    if value[0] == BATCH_START_TYPE:
        head = _START_HEAD
    elif value[0] == BATCH_END_TYPE:
        head = _END_HEAD
    else:
        raise MarkerDecodeError(f"not a BATCH START or BATCH END: type byte {value[0]:#04x}")
    if len(value) < head.size:
        raise MarkerDecodeError(f"batch marker shorter than its {head.size}-byte header: {_describe(value)}")
    fields = head.unpack_from(value)
    count = fields[-1]
    if not 1 <= count <= MAX_RUNS:
        raise MarkerDecodeError(f"batch marker with {count} runs (must be 1 to {MAX_RUNS})")
    if len(value) != head.size + _RUN_SIZE * count:
        expected = head.size + _RUN_SIZE * count
        raise MarkerDecodeError(f"batch marker of {count} runs must be {expected} bytes, got {len(value)}")
    runs = _decode_runs(base_offset, struct.unpack_from(f">{2 * count}i", value, head.size))
    return BatchStart(fields[1], runs) if value[0] == BATCH_START_TYPE else BatchEnd(runs)


def runs_of(offsets: Iterable[int]) -> tuple[Run, ...]:
    """The runs of a set of offsets (any order, duplicates allowed)."""
    ordered = sorted(set(offsets))
    if not ordered:
        return ()
    first, count = ordered[0], len(ordered)
    if ordered[-1] - first + 1 == count:  # distinct and ascending: no gap (the common case, no loop over them)
        return ((first, count),)
    runs: list[Run] = []
    start = previous = ordered[0]
    for offset in ordered[1:]:
        if offset != previous + 1:
            runs.append((start, previous - start + 1))
            start = offset
        previous = offset
    runs.append((start, previous - start + 1))
    return tuple(runs)


def contiguous_runs(offsets: Sequence[int]) -> tuple[Run, ...]:
    """`runs_of` with a fast path for what a consumer returns: ascending offsets with no gap (one run); a range is
    its run at once (a Spark micro-batch's range may hold millions of offsets)."""
    if isinstance(offsets, range) and offsets.step == 1:
        return ((offsets.start, len(offsets)),) if offsets else ()
    first, count = offsets[0], len(offsets)
    if offsets[-1] - first + 1 == count and list(offsets) == list(range(first, first + count)):  # compared in C
        return ((first, count),)
    return runs_of(offsets)


def offsets_in(runs: Iterable[Run]) -> Iterator[int]:
    """Every offset of the runs, ascending."""
    for start, length in runs:
        yield from range(start, start + length)


def split_runs(runs: Sequence[Run], max_offsets: int = MAX_OFFSETS, max_runs: int = MAX_RUNS) -> list[tuple[Run, ...]]:
    """Cut a run list into pieces that each respect the per-record limits (a writer's side of "Limits")."""
    pieces: list[tuple[Run, ...]] = []
    current: list[Run] = []
    total = 0
    for start, length in runs:
        while length > 0:
            if len(current) == max_runs or total == max_offsets:
                pieces.append(tuple(current))
                current, total = [], 0
            take = min(length, max_offsets - total)
            current.append((start, take))
            total += take
            start, length = start + take, length - take
    if current:
        pieces.append(tuple(current))
    return pieces


def _encode_runs(runs: Sequence[Run]) -> bytes:
    flat: list[int] = []
    end = runs[0][0] if runs else 0
    for start, length in runs:
        flat.append(start - end)
        flat.append(length)
        end = start + length
    return struct.pack(f">{len(flat)}i", *flat)


def _decode_runs(base_offset: int, flat: tuple[int, ...]) -> tuple[Run, ...]:
    runs: list[Run] = []
    end = base_offset
    total = 0
    for i in range(0, len(flat), 2):
        gap, length = flat[i], flat[i + 1]
        if i == 0 and gap != 0:
            raise MarkerDecodeError(f"the first run of a batch marker must have gap 0, got {gap}")
        if i > 0 and gap < 1:
            raise MarkerDecodeError(f"run {i // 2} of a batch marker has gap {gap} (must be >= 1)")
        if length < 1:
            raise MarkerDecodeError(f"run {i // 2} of a batch marker has length {length} (must be >= 1)")
        total += length
        if total > MAX_OFFSETS:
            raise MarkerDecodeError(f"batch marker covers more than {MAX_OFFSETS} offsets")
        start = end + gap
        end = start + length
        runs.append((start, length))
    if end - 1 > _INT64_MAX:
        raise MarkerDecodeError(f"batch marker offsets {base_offset}..{end - 1} pass 2^63-1")
    return tuple(runs)
