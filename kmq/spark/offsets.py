"""Offsets of the streaming source (per queue partition: the next offset to read) and splitting their ranges.

Pure: no Kafka, no Spark. Spark stores these dicts in its checkpoint as JSON, so keys are strings.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

SourceOffset = dict[str, int]  # "partition" -> next offset to read


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets [start, end) of one queue partition: what one Spark task reads."""

    partition: int
    start: int
    end: int


def to_offset(positions: Mapping[int, int]) -> SourceOffset:
    return {str(partition): int(offset) for partition, offset in sorted(positions.items())}


def from_offset(offset: Mapping[str, int]) -> dict[int, int]:
    return {int(partition): int(position) for partition, position in offset.items()}


def limit_end(start: Mapping[int, int], end: Mapping[int, int], max_rows: int) -> dict[int, int]:
    """`end` cut so that at most `max_rows` rows lie between `start` and it, shared fairly among partitions."""
    available = {p: max(0, end[p] - start.get(p, 0)) for p in end}
    taken = dict.fromkeys(available, 0)
    budget = max_rows
    while budget > 0:
        hungry = [p for p in sorted(available) if taken[p] < available[p]]
        if not hungry:
            break
        share = max(1, budget // len(hungry))
        for p in hungry:
            grant = min(share, available[p] - taken[p], budget)
            taken[p] += grant
            budget -= grant
    return {p: start.get(p, 0) + taken[p] for p in end}


def split(start: Mapping[int, int], end: Mapping[int, int], max_rows_per_range: int) -> list[OffsetRange]:
    """The ranges of a micro-batch: each partition's cut into the fewest pieces of at most `max_rows_per_range`,
    of sizes that differ by one at most (as Spark's Kafka source cuts with maxRecordsPerPartition)."""
    ranges: list[OffsetRange] = []
    for partition in sorted(end):
        first = start.get(partition, 0)  # a partition added since the query began: from its beginning
        rows = end[partition] - first
        pieces = -(-rows // max_rows_per_range)
        bounds = [first + rows * piece // pieces for piece in range(pieces + 1)] if pieces > 0 else []
        ranges.extend(OffsetRange(partition, a, b) for a, b in itertools.pairwise(bounds))
    return ranges
