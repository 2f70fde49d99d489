"""`LeaseSchedule`: which messages in a worker's hands need their lease extended, and which ran too long (pure:
takes `now_ms`, never touches a client or the clock)."""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
_COMPACT_SLACK = 1024


@dataclass(slots=True)
class _Lease(Generic[T]):
    item: T
    received_ms: int
    deadline_ms: int
    seq: int


@dataclass(frozen=True, slots=True)
class Due(Generic[T]):
    """`extend`: (item, timeout_ms) to extend now; `expired`: items past the maximum processing time (no longer
    scheduled: the caller treats them as failed)."""

    extend: list[tuple[T, int]] = field(default_factory=list)
    expired: list[T] = field(default_factory=list)


class LeaseSchedule(Generic[K, T]):
    """Leases by deadline (a heap, entries of removed keys dropped lazily and compacted when they pile up).

    A lease is extended once its deadline is `margin_ms` away, by `extension_ms` — but never past
    `received_ms + max_processing_ms`; at that bound it expires instead."""

    def __init__(self, margin_ms: int, extension_ms: int, max_processing_ms: int) -> None:
        if extension_ms <= margin_ms:
            raise ValueError(f"a lease extension ({extension_ms} ms) must be longer than the margin ({margin_ms} ms)")
        self.margin_ms, self.extension_ms, self.max_processing_ms = margin_ms, extension_ms, max_processing_ms
        self._leases: dict[K, _Lease[T]] = {}
        self._heap: list[tuple[int, int, K]] = []
        self._seq = 0

    def add(self, key: K, item: T, received_ms: int, deadline_ms: int) -> None:
        self._seq += 1
        self._leases[key] = _Lease(item, received_ms, deadline_ms, self._seq)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def remove(self, key: K) -> bool:
        """Forget a lease (its message was settled); False when it was not held (e.g. it expired)."""
        found = self._leases.pop(key, None) is not None
        if found and len(self._heap) > 2 * len(self._leases) + _COMPACT_SLACK:
            self._compact()
        return found

    def __len__(self) -> int:
        return len(self._leases)

    def __contains__(self, key: object) -> bool:
        return key in self._leases

    def items(self) -> list[T]:
        return [lease.item for lease in self._leases.values()]

    def next_due_ms(self) -> int | None:
        """When `due` next has something to do (None: nothing held)."""
        while self._heap and not self._current(self._heap[0]):
            heapq.heappop(self._heap)
        return self._heap[0][0] - self.margin_ms if self._heap else None

    def due(self, now_ms: int) -> Due[T]:
        """The leases to extend now (their new deadlines applied here) and those that expired."""
        due: Due[T] = Due()
        while self._heap and self._heap[0][0] - self.margin_ms <= now_ms:
            entry = heapq.heappop(self._heap)
            if not self._current(entry):
                continue
            key = entry[2]
            lease = self._leases[key]
            left_ms = lease.received_ms + self.max_processing_ms - now_ms
            if left_ms <= self.margin_ms:
                del self._leases[key]
                due.expired.append(lease.item)
                continue
            timeout_ms = min(self.extension_ms, left_ms)
            due.extend.append((lease.item, timeout_ms))
            self.add(key, lease.item, lease.received_ms, now_ms + timeout_ms)
        return due

    def _current(self, entry: tuple[int, int, K]) -> bool:
        lease = self._leases.get(entry[2])
        return lease is not None and lease.seq == entry[1]

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if self._current(entry)]
        heapq.heapify(self._heap)
