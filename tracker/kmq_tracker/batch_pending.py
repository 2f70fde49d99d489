"""The BATCH STARTs of one markers partition, each held as one entry (PROTOCOL.md, "Tracker state").

An entry is a group: the marker offset of its BATCH START, its deadline, how many of its offsets are still pending,
and the span they lie in. The offsets themselves are runs (start, end, marker offset of the group) in one
`SortedRows` keyed by run start — 24 bytes a run, no Python object per run. The runs are disjoint, as each queue
offset has at most one winning START. An END (of either format) or a newer START for some offsets carves them out of
the runs they sit in, so memory follows the number of runs (one per contiguous batch), not of messages. Pure: no
Kafka, no clock. Marker offsets arrive ascending, as a markers partition is read in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sortedcontainers import SortedList

from kmq.batch_markers import Run
from kmq_tracker._index import DEFAULT_LOAD, SortedRows

_DEADLINE, _PENDING, _LO, _HI = range(4)


class BatchSet:
    """Pending offsets of BATCH STARTs, one entry per batch record, ordered by deadline and by marker offset."""

    def __init__(self, *, chunk_rows: int = DEFAULT_LOAD) -> None:
        self._runs = SortedRows(3, chunk_rows)  # (run start, run end exclusive, marker offset of its group)
        self._groups: dict[int, list[int]] = {}  # marker offset -> [deadline, pending, span lo, span hi]
        self._by_deadline = SortedList()  # (deadline_ms, marker_offset)
        self._by_marker = SortedList()  # marker offsets
        self._len = 0

    def start(self, runs: Iterable[Run], marker_offset: int, deadline_ms: int) -> None:
        """A BATCH START: its offsets leave the groups that held them and form a new group."""
        runs = tuple(runs)
        if not runs:
            return
        self.end_runs(runs)
        for start, length in runs:
            self._runs.add((start, start + length, marker_offset))
        pending = sum(length for _, length in runs)
        self._groups[marker_offset] = [deadline_ms, pending, runs[0][0], runs[-1][0] + runs[-1][1]]
        self._by_deadline.add((deadline_ms, marker_offset))
        self._by_marker.add(marker_offset)
        self._len += pending

    def end_range(self, lo: int, hi: int) -> int:
        """Offsets lo..hi-1 are no longer pending here (an END, or a newer START for them); how many were."""
        return self.end_runs(((lo, hi - lo),)) if hi > lo else 0

    def end_runs(self, runs: tuple[Run, ...]) -> int:
        """The offsets of `runs` (ascending, disjoint) are no longer pending here; how many were.

        One pass: the stored runs that may overlap are read once, cut by every run given, and written back at once."""
        if not self._len or not runs:
            return 0
        lo, hi = runs[0][0], runs[-1][0] + runs[-1][1]
        before = self._runs.floor(lo - 1)
        if before is not None and before[1] > lo:
            lo = before[0]
        stored = self._runs.rows_between(lo, hi + 1)  # + 1: a remainder may start at hi
        if not stored:
            return 0
        pieces, cuts = _cut(stored, runs)
        if not cuts:
            return 0
        self._runs.replace_between(lo, hi + 1, pieces)
        return self._count_cuts(cuts)

    def due(self, now_ms: int, limit: int) -> Iterator[tuple[int, int, int]]:
        """(deadline, marker offset, queue offset) of due offsets, in that order, at most `limit`; not removed."""
        for deadline_ms, marker_offset in self._by_deadline.irange(maximum=(now_ms, 2**63)):
            if limit <= 0:
                return
            group = self._groups[marker_offset]
            for start, end, marker in self._runs.rows_between(group[_LO], group[_HI]):
                if marker != marker_offset:
                    continue  # a run of another group inside this one's span
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
        return marker, self._groups[marker][_DEADLINE]

    def holder(self, queue_offset: int) -> tuple[int, int] | None:
        """(marker offset, deadline) of the group holding `queue_offset`, or None."""
        row = self._runs.floor(queue_offset) if self._len else None
        if row is None or queue_offset >= row[1]:
            return None
        return row[2], self._groups[row[2]][_DEADLINE]

    def groups(self) -> int:
        return len(self._groups)

    def runs(self) -> int:
        return len(self._runs)

    def __len__(self) -> int:
        return self._len

    def _count_cuts(self, cuts: dict[int, int]) -> int:
        for marker, cut in cuts.items():
            group = self._groups[marker]
            group[_PENDING] -= cut
            if group[_PENDING] == 0:
                del self._groups[marker]
                self._by_deadline.remove((group[_DEADLINE], marker))
                self._by_marker.remove(marker)
        total = sum(cuts.values())
        self._len -= total
        return total


def _cut(stored: list[tuple[int, ...]], runs: tuple[Run, ...]) -> tuple[list[tuple[int, ...]], dict[int, int]]:
    """The stored runs minus the given ones (both ascending), and how many offsets each group lost."""
    pieces: list[tuple[int, ...]] = []
    cuts: dict[int, int] = {}
    r = 0
    for start, end, marker in stored:
        while r < len(runs) and runs[r][0] + runs[r][1] <= start:
            r += 1  # given runs wholly before this stored run
        position, i = start, r
        while i < len(runs) and runs[i][0] < end:
            cut_lo, cut_hi = max(runs[i][0], start), min(runs[i][0] + runs[i][1], end)
            if cut_lo > position:
                pieces.append((position, cut_lo, marker))
            cuts[marker] = cuts.get(marker, 0) + cut_hi - cut_lo
            position = cut_hi
            if runs[i][0] + runs[i][1] > end:
                break  # this given run reaches into the next stored run
            i += 1
        r = i
        if position < end:
            pieces.append((position, end, marker))
    return pieces, cuts
