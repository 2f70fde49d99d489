"""`LeaseSchedule`: which messages in a worker's hands need their lease extended, and which ran too long (pure:
takes `now_ms`, never touches a client or the clock)."""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Due(Generic[T]):
    """`extend`: (item, timeout_ms) to extend now; `expired`: items past the maximum processing time (no longer
    scheduled: the caller treats them as failed)."""

    extend: list[tuple[T, int]] = field(default_factory=list)
    expired: list[T] = field(default_factory=list)


class LeaseSchedule(Generic[K, T]):
    """Leases by deadline. A worker receives messages in batches that share a deadline, so the heap holds one entry
    per batch (its deadline, a sequence number, its keys): adding and removing a lease is a dict operation.

    A lease is extended once its deadline is `margin_ms` away, by `extension_ms` — but never past
    `received_ms + max_processing_ms`; at that bound it expires instead."""

    def __init__(self, margin_ms: int, extension_ms: int, max_processing_ms: int) -> None:
        if extension_ms <= margin_ms:
            raise ValueError(f"a lease extension ({extension_ms} ms) must be longer than the margin ({margin_ms} ms)")
        self.margin_ms, self.extension_ms, self.max_processing_ms = margin_ms, extension_ms, max_processing_ms
        self.held: dict[K, tuple[T, int, int]] = {}  # key -> (item, received_ms, sequence of its heap entry)
        self._heap: list[tuple[int, int, list[K]]] = []
        self._seq = 0

    def add(self, key: K, item: T, received_ms: int, deadline_ms: int) -> None:
        self.add_all([(key, item)], received_ms, deadline_ms)

    def add_all(self, entries: Iterable[tuple[K, T]], received_ms: int, deadline_ms: int) -> None:
        """Leases sharing one deadline (a received batch, or the leases one `due` call extended)."""
        self._seq += 1
        seq, held, keys = self._seq, self.held, []
        for key, item in entries:
            held[key] = (item, received_ms, seq)
            keys.append(key)
        if keys:
            heapq.heappush(self._heap, (deadline_ms, seq, keys))

    def remove(self, key: K) -> bool:
        """Forget a lease (its message was settled); False when it was not held (e.g. it expired)."""
        return self.held.pop(key, None) is not None

    def __len__(self) -> int:
        return len(self.held)

    def __contains__(self, key: object) -> bool:
        return key in self.held

    def items(self) -> list[T]:
        return [lease[0] for lease in self.held.values()]

    def next_due_ms(self) -> int | None:
        """When `due` next has something to do (None: nothing held)."""
        while self._heap and not self._live(self._heap[0]):
            heapq.heappop(self._heap)
        return self._heap[0][0] - self.margin_ms if self._heap else None

    def due(self, now_ms: int) -> Due[T]:
        """The leases to extend now (their new deadlines applied here) and those that expired."""
        due: Due[T] = Due()
        regrouped: dict[tuple[int, int], list[tuple[K, T]]] = {}  # (timeout, received) -> leases extended alike
        while self._heap and self._heap[0][0] - self.margin_ms <= now_ms:
            _, seq, keys = heapq.heappop(self._heap)
            for key in keys:
                lease = self.held.get(key)
                if lease is None or lease[2] != seq:
                    continue  # settled, or rescheduled by a later entry
                item, received_ms, _ = lease
                left_ms = received_ms + self.max_processing_ms - now_ms
                if left_ms <= self.margin_ms:
                    del self.held[key]
                    due.expired.append(item)
                    continue
                timeout_ms = min(self.extension_ms, left_ms)
                due.extend.append((item, timeout_ms))
                regrouped.setdefault((timeout_ms, received_ms), []).append((key, item))
        for (timeout_ms, received_ms), group in regrouped.items():
            self.add_all(group, received_ms, now_ms + timeout_ms)
        return due

    def _live(self, entry: tuple[int, int, list[K]]) -> bool:
        seq = entry[1]
        return any((lease := self.held.get(key)) is not None and lease[2] == seq for key in entry[2])
