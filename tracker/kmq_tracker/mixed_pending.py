"""The pending set of one markers partition when both marker formats share it (PROTOCOL.md, "Batch markers").

kmq STARTs live in a `PendingSet` (one entry per offset), BATCH STARTs in a `BatchSet` (one entry per record). Each
queue offset has at most one winning START, the one with the highest marker offset: a kmq START takes its offset out
of any batch, a BATCH START takes its offsets out of the kmq entries and of older batches, and an END or BATCH END
removes them from both. Pure: no Kafka, no clock.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

from kmq.batch_markers import Run
from kmq_tracker._index import DEFAULT_LOAD
from kmq_tracker.batch_pending import BatchSet
from kmq_tracker.pending import PendingSet


class MixedPending:
    """The winning START per queue offset without an END yet, ordered by (deadline, marker offset, queue offset)."""

    def __init__(self, singles: PendingSet | None = None, *, chunk_rows: int = DEFAULT_LOAD) -> None:
        # chunk_rows tunes the index chunks; tests make it small to exercise splits and merges.
        self.singles = singles if singles is not None else PendingSet(chunk_rows=chunk_rows)
        self.batches = BatchSet(chunk_rows=chunk_rows)

    def start(self, queue_offset: int, marker_offset: int, deadline_ms: int) -> None:
        """A kmq START (a first delivery, extend or nack): it overrides a batch for this one offset."""
        if len(self.batches):
            self.batches.end_range(queue_offset, queue_offset + 1)
        self.singles.start(queue_offset, marker_offset, deadline_ms)

    def end(self, queue_offset: int) -> bool:
        """A kmq END (or a settled redelivery); True if the offset was pending."""
        ended = self.singles.end(queue_offset)
        if len(self.batches):
            ended = self.batches.end_range(queue_offset, queue_offset + 1) > 0 or ended
        return ended

    def batch_start(self, runs: Iterable[Run], marker_offset: int, deadline_ms: int) -> None:
        runs = tuple(runs)
        self._end_singles(runs)
        self.batches.start(runs, marker_offset, deadline_ms)

    def batch_end(self, runs: Iterable[Run]) -> int:
        """A BATCH END; the number of offsets that were pending."""
        runs = tuple(runs)
        ended = self._end_singles(runs)
        if len(self.batches):
            ended += self.batches.end_runs(runs)
        return ended

    def due(self, now_ms: int, limit: int) -> list[int]:
        """Queue offsets whose deadline is <= now_ms, by (deadline, marker offset, queue offset), at most `limit`."""
        if limit <= 0:
            return []
        singles = self.singles.due_rows(now_ms, limit)
        if not len(self.batches):
            return [row[2] for row in singles]
        merged = heapq.merge(singles, self.batches.due(now_ms, limit))
        return [row[2] for row in itertools.islice(merged, limit)]

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d in (self.singles.next_deadline_ms(), self.batches.next_deadline_ms()) if d is not None]
        return min(deadlines) if deadlines else None

    def commit_offset(self, consumed_position: int) -> int:
        """The smallest marker offset of a pending START of either format, else the consumed position."""
        first = self._first_marker()
        return consumed_position if first is None else first[0]

    def oldest_deadline_ms(self) -> int | None:
        """The deadline of the pending START with the smallest marker offset, or None."""
        first = self._first_marker()
        return None if first is None else first[1]

    def deadline_of(self, queue_offset: int) -> int | None:
        deadline = self.singles.deadline_of(queue_offset)
        if deadline is None and len(self.batches):
            holder = self.batches.holder(queue_offset)
            deadline = None if holder is None else holder[1]
        return deadline

    def __len__(self) -> int:
        return len(self.singles) + len(self.batches)

    def __contains__(self, queue_offset: object) -> bool:
        if queue_offset in self.singles:
            return True
        return isinstance(queue_offset, int) and self.batches.holder(queue_offset) is not None

    def __repr__(self) -> str:
        return f"MixedPending(pending={len(self)}, batches={self.batches.groups()})"

    def _end_singles(self, runs: tuple[Run, ...]) -> int:
        if not len(self.singles):
            return 0
        ended = 0
        for start, length in runs:
            for offset in self.singles.keys_between(start, start + length):
                ended += self.singles.end(offset)
        return ended

    def _first_marker(self) -> tuple[int, ...] | None:
        firsts = [f for f in (self.singles.first_marker(), self.batches.first_marker()) if f is not None]
        return min(firsts) if firsts else None
