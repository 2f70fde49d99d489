"""The BATCH STARTs of one markers partition, each held as one entry (PROTOCOL.md, "Tracker state").

An entry is a group: the marker offset of its BATCH START, its deadline, and the runs of its offsets still pending.
The runs of every group live in one map keyed by run start; they are disjoint, as each queue offset has at most one
winning START. An END (of either format) or a newer START for some offsets carves them out of the runs they sit in,
so memory follows the number of runs (one per contiguous batch), not the number of messages. Pure: no Kafka, no
clock. Marker offsets arrive ascending, as a markers partition is read in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from sortedcontainers import SortedDict, SortedList

from kmq.batch_markers import Run


@dataclass(slots=True)
class _Group:
    deadline_ms: int
    pending: int
    starts: set[int] = field(default_factory=set)  # starts of its runs in `BatchSet._runs`


class BatchSet:
    """Pending offsets of BATCH STARTs, one entry per batch record, ordered by deadline and by marker offset."""

    def __init__(self) -> None:
        self._runs = SortedDict()  # run start -> (run end exclusive, marker offset of its group)
        self._groups: dict[int, _Group] = {}
        self._by_deadline = SortedList()  # (deadline_ms, marker_offset)
        self._by_marker = SortedList()  # marker offsets
        self._len = 0

    def start(self, runs: Iterable[Run], marker_offset: int, deadline_ms: int) -> None:
        """A BATCH START: its offsets leave the groups that held them and form a new group."""
        runs = tuple(runs)
        for start, length in runs:
            self.end_range(start, start + length)
        group = _Group(deadline_ms, 0)
        for start, length in runs:
            self._runs[start] = (start + length, marker_offset)
            group.starts.add(start)
            group.pending += length
        if group.pending:
            self._groups[marker_offset] = group
            self._by_deadline.add((deadline_ms, marker_offset))
            self._by_marker.add(marker_offset)
            self._len += group.pending

    def end_range(self, lo: int, hi: int) -> int:
        """Offsets lo..hi-1 are no longer pending here (an END, or a newer START for them); how many were."""
        if not self._runs:
            return 0
        removed = 0
        index = max(0, self._runs.bisect_right(lo) - 1)
        keys = self._runs.keys()
        while index < len(keys):
            start = keys[index]
            if start >= hi:
                break
            end, marker = self._runs[start]
            if end <= lo:
                index += 1
                continue
            removed += self._carve(start, end, marker, lo, hi)
            index = self._runs.bisect_left(end)
        return removed

    def due(self, now_ms: int, limit: int) -> Iterator[tuple[int, int, int]]:
        """(deadline, marker offset, queue offset) of due offsets, in that order, at most `limit`; not removed."""
        for deadline_ms, marker_offset in self._by_deadline.irange(maximum=(now_ms, 2**63)):
            if limit <= 0:
                return
            for start in sorted(self._groups[marker_offset].starts):
                end = self._runs[start][0]
                for offset in range(start, min(end, start + limit)):
                    yield deadline_ms, marker_offset, offset
                limit -= end - start
                if limit <= 0:
                    return

    def next_deadline_ms(self) -> int | None:
        return self._by_deadline[0][0] if self._by_deadline else None

    def first_marker(self) -> tuple[int, int] | None:
        """(marker offset, deadline) of the group with the smallest marker offset, or None."""
        if not self._by_marker:
            return None
        marker = self._by_marker[0]
        return marker, self._groups[marker].deadline_ms

    def holder(self, queue_offset: int) -> tuple[int, int] | None:
        """(marker offset, deadline) of the group holding `queue_offset`, or None."""
        index = self._runs.bisect_right(queue_offset) - 1
        if index < 0:
            return None
        start = self._runs.keys()[index]
        end, marker = self._runs[start]
        return (marker, self._groups[marker].deadline_ms) if queue_offset < end else None

    def groups(self) -> int:
        return len(self._groups)

    def __len__(self) -> int:
        return self._len

    def _carve(self, start: int, end: int, marker: int, lo: int, hi: int) -> int:
        """Cut lo..hi-1 out of the run start..end-1 of group `marker`; the number of offsets cut."""
        group = self._groups[marker]
        del self._runs[start]
        group.starts.discard(start)
        if start < lo:
            self._runs[start] = (lo, marker)
            group.starts.add(start)
        if hi < end:
            self._runs[hi] = (end, marker)
            group.starts.add(hi)
        cut = min(end, hi) - max(start, lo)
        group.pending -= cut
        self._len -= cut
        if group.pending == 0:
            del self._groups[marker]
            self._by_deadline.remove((group.deadline_ms, marker))
            self._by_marker.remove(marker)
        return cut
