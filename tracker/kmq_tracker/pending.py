"""The pending set of one markers partition: the newest START per queue offset that has no END yet.

This is kmq's `MarkersQueue`, kept pure: no Kafka, no clock (time comes in as `now_ms`). Three indexes hold the same
entries — by queue offset (the key), by (deadline, marker offset) for `due`, and by marker offset for the commit — each
a `SortedRows` of int64 columns, so an entry costs 64 B and every update is O(log n). Nothing is deleted lazily: an
END or a superseding START removes the entry from all three indexes at once.
"""

from __future__ import annotations

from kmq_tracker._index import DEFAULT_LOAD, SortedRows

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


class PendingSet:
    """STARTs without an END for one queue partition, ordered by deadline and by marker offset."""

    def __init__(self, *, chunk_rows: int = DEFAULT_LOAD) -> None:
        # chunk_rows tunes the index chunks; tests make it small to exercise splits and merges.
        self._by_key = SortedRows(3, chunk_rows)  # (queue_offset, marker_offset, deadline_ms)
        self._by_deadline = SortedRows(3, chunk_rows)  # (deadline_ms, marker_offset, queue_offset)
        self._by_marker = SortedRows(2, chunk_rows)  # (marker_offset, deadline_ms)

    def start(self, queue_offset: int, marker_offset: int, deadline_ms: int) -> None:
        """Record a START; for a key, the one with the highest marker offset wins and older ones are void.

        A deadline outside int64 is saturated: it is never (or always) due either way.
        """
        if not (_INT64_MIN <= queue_offset <= _INT64_MAX and _INT64_MIN <= marker_offset <= _INT64_MAX):
            raise ValueError(f"offsets must be int64, got queue {queue_offset} and marker {marker_offset}")
        if not _INT64_MIN <= deadline_ms <= _INT64_MAX:
            deadline_ms = _INT64_MAX if deadline_ms > 0 else _INT64_MIN
        current = self._by_key.find(queue_offset)
        if current is not None:
            if current[1] >= marker_offset:
                return
            self._by_key.pop(queue_offset)
            self._unindex(current)
        self._by_key.add((queue_offset, marker_offset, deadline_ms))
        self._by_deadline.add((deadline_ms, marker_offset, queue_offset))
        self._by_marker.add((marker_offset, deadline_ms))

    def end(self, queue_offset: int) -> bool:
        """Record an END; True if the key was pending (an END for an unknown key is harmless)."""
        current = self._by_key.pop(queue_offset)
        if current is None:
            return False
        self._unindex(current)
        return True

    def due(self, now_ms: int, limit: int) -> list[int]:
        """Queue offsets whose deadline is <= now_ms, by (deadline, marker offset), at most `limit`; not removed."""
        if limit <= 0:
            return []
        return self._by_deadline.leading(now_ms, 2, limit)

    def due_rows(self, now_ms: int, limit: int) -> list[tuple[int, ...]]:
        """`due`, as (deadline, marker offset, queue offset) rows."""
        return self._by_deadline.leading_rows(now_ms, limit) if limit > 0 else []

    def keys_between(self, lo: int, hi: int) -> list[int]:
        """Pending queue offsets in lo..hi-1."""
        return self._by_key.keys_between(lo, hi) if len(self._by_key) else []

    def first_marker(self) -> tuple[int, ...] | None:
        """(marker offset, deadline) of the pending START with the smallest marker offset, or None."""
        return self._by_marker.first()

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline, or None when nothing is pending."""
        first = self._by_deadline.first()
        return None if first is None else first[0]

    def commit_offset(self, consumed_position: int) -> int:
        """The offset to commit on the markers partition: the smallest pending marker offset, else the position."""
        first = self._by_marker.first()
        return consumed_position if first is None else first[0]

    def oldest_deadline_ms(self) -> int | None:
        """The deadline of the oldest pending START (smallest marker offset), or None when nothing is pending."""
        first = self._by_marker.first()
        return None if first is None else first[1]

    def deadline_of(self, queue_offset: int) -> int | None:
        """The deadline of the pending START for `queue_offset`, or None if it is not pending."""
        return self._deadline(queue_offset)

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, queue_offset: object) -> bool:
        return isinstance(queue_offset, int) and self._by_key.find(queue_offset) is not None

    def __repr__(self) -> str:
        return f"PendingSet(pending={len(self)}, next_deadline_ms={self.next_deadline_ms()})"

    def _deadline(self, queue_offset: int) -> int | None:
        entry = self._by_key.find(queue_offset)
        return None if entry is None else entry[2]

    def _unindex(self, entry: tuple[int, ...]) -> None:
        """Drop a START, already popped from the key index, from the other two."""
        queue_offset, marker_offset, deadline_ms = entry
        self._by_deadline.discard((deadline_ms, marker_offset, queue_offset))
        self._by_marker.discard((marker_offset, deadline_ms))
