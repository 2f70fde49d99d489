"""Running a test module's tests with both marker formats (PROTOCOL.md: `batch` passes the same fault tests).

A module overrides `make_config` with `with_marker_format`: every config it makes then carries the format, so the
clients, trackers and child processes the test starts all use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kmq.batch_markers import BatchStart, decode_batch_marker, is_batch_value, offsets_in
from kmq.config import KmqConfig
from kmq.markers import MarkerKey, StartMarker, decode_marker
from tests.helpers import Record

MakeConfig = Callable[..., KmqConfig]
FORMATS = ["kmq", "batch"]


def with_marker_format(make_config: MakeConfig, marker_format: str) -> MakeConfig:
    def make(partitions: int = 4, **overrides: Any) -> KmqConfig:
        return make_config(partitions, **{"marker_format": marker_format, **overrides})

    return make


def pending_tail(markers: Iterable[Record], partitions: int) -> dict[int, int]:
    """PROTOCOL.md, Commit: per partition, the smallest marker offset among STARTs without END (newest START wins per
    queue offset), with every batch record expanded into one kmq marker per offset."""
    starts: dict[int, dict[int, int]] = {p: {} for p in range(partitions)}
    for record in markers:
        is_start, offsets = _marked(record)
        for offset in offsets:
            if is_start:
                starts[record.partition][offset] = record.offset
            else:
                starts[record.partition].pop(offset, None)
    return {p: min(pending.values()) for p, pending in starts.items()}


def marked_offsets(markers: Iterable[Record]) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """(partition, offset) of every queue offset the records START, and of every one they END, in either format."""
    started: set[tuple[int, int]] = set()
    ended: set[tuple[int, int]] = set()
    for record in markers:
        is_start, offsets = _marked(record)
        (started if is_start else ended).update((record.partition, o) for o in offsets)
    return started, ended


def ended_among(markers: Iterable[Record], wanted: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The (partition, offset) of `wanted` that the records END (`marked_offsets` keeping only those: a whole
    markers topic's ENDs need not be held)."""
    ended: set[tuple[int, int]] = set()
    for record in markers:
        is_start, offsets = _marked(record)
        if not is_start:
            ended.update(where for o in offsets if (where := (record.partition, o)) in wanted)
    return ended


def _marked(record: Record) -> tuple[bool, list[int]]:
    """Whether a marker record STARTs (else ENDs), and the queue offsets it covers (a batch record several)."""
    key = MarkerKey.decode(record.key)
    value = record.value or b""
    if is_batch_value(value):
        marker = decode_batch_marker(key.offset, value)
        return isinstance(marker, BatchStart), list(offsets_in(marker.runs))
    return isinstance(decode_marker(value), StartMarker), [key.offset]
