"""`LeaseSchedule`: which messages in a worker's hands need their lease extended, and which ran too long (pure:
takes `now_ms`, never touches a client or the clock)."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Generic, TypeVar

from kmq.message import Message

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


# A lease's key: offset << KEY_SHIFT | partition (a Kafka partition number is below 2**31), one int rather than a
# tuple. The offset goes high: an int's hash is its value modulo 2**61 - 1, so partition << 63 | offset would hash to
# 4 * partition + offset, and partition 1's offset 0 would collide with partition 0's offset 4.
KEY_SHIFT = 32


def lease_key(msg: Message) -> int:
    """A message's lease key: an int, which the cyclic garbage collector does not track (a tuple it would)."""
    return msg.offset << KEY_SHIFT | msg.partition


def lease_keys(messages: list[Message]) -> list[int]:
    """`lease_key` of each message (this runs for every message). One comprehension reading a `Message`'s fields by
    their index (4: offset, 3: partition): measured a third quicker than a chain of `map`s over field getters, and
    than reading the fields by name."""
    return [msg[4] << 32 | msg[3] for msg in messages]  # KEY_SHIFT, inlined


@dataclass(frozen=True, slots=True)
class Due(Generic[T]):
    """`extend`: (item, timeout_ms) to extend now; `expired`: items past the maximum processing time (no longer
    scheduled: the caller treats them as failed)."""

    extend: list[tuple[T, int]] = field(default_factory=list)
    expired: list[T] = field(default_factory=list)


class LeaseSchedule(Generic[K, T]):
    """Leases by deadline. A worker receives messages in batches that share a deadline, so the schedule keeps one
    entry per batch (its keys and items, when they were received, how many of its leases are still held) and a heap
    of (deadline, entry): adding and removing a lease is a dict operation.

    Memory: `held` maps each key to its entry's sequence number, an int, so nothing per lease is an object the cyclic
    garbage collector tracks (a tuple per lease, held while its message ran, tripled a worker's young collections and
    set off full ones); a worker's keys are ints too (`lease_key`). An entry whose leases are all
    removed is dropped at once, with its items: its heap slot, two ints, waits for its deadline.

    A batch that one thread runs through in order (`add_run`, with `keys_of` given) is leased as a whole: no key of
    it enters `held`, and `settle_run` counts its settled prefix. Any other look at its leases (`due`, a `remove` of
    one of its keys, `unrun` when the run is taken over, `items`) first turns its unsettled rest into keyed leases of
    the same entry, so the schedule means the same with or without runs; `len` counts both.

    A lease is extended once its deadline is `margin_ms` away, by `extension_ms` — but never past
    `received_ms + max_processing_ms`; at that bound it expires instead."""

    def __init__(
        self,
        margin_ms: int,
        extension_ms: int,
        max_processing_ms: int,
        keys_of: Callable[[list[T]], list[K]] | None = None,
    ) -> None:
        """`keys_of(items)`: their keys (for `add_run`, whose keys are computed only when a run turns keyed)."""
        if extension_ms <= margin_ms:
            raise ValueError(f"a lease extension ({extension_ms} ms) must be longer than the margin ({margin_ms} ms)")
        self.margin_ms, self.extension_ms, self.max_processing_ms = margin_ms, extension_ms, max_processing_ms
        self.held: dict[K, int] = {}  # key -> sequence number of its entry (read-only outside: remove through here)
        self._entries: dict[int, _Entry[K, T]] = {}
        self._heap: list[tuple[int, int]] = []  # (deadline, sequence number)
        self._seq = 0
        self._runs: dict[int, _Entry[K, T]] = {}  # entries leased as a whole (`add_run`), no key of theirs in `held`
        self._run_live = 0  # their unsettled messages
        self._keys_of = keys_of

    def add(self, key: K, item: T, received_ms: int, deadline_ms: int) -> None:
        self.add_all([key], [item], received_ms, deadline_ms)

    def add_all(self, keys: Sequence[K], items: Sequence[T], received_ms: int, deadline_ms: int) -> None:
        """Leases sharing one deadline (a received batch, or the leases one `due` call extended): `items[i]` under
        `keys[i]`. Entered by one `dict.update` over a `zip`, with no Python-level loop: this runs for every message
        a worker receives, on the thread that receives. A key held already moves to this entry (its old entry keeps
        counting it, and is then dropped only at its deadline)."""
        if not keys:
            return
        self._seq += 1
        seq = self._seq
        self.held.update(zip(keys, repeat(seq)))
        self._entries[seq] = _Entry(keys, items, received_ms, len(keys))
        heapq.heappush(self._heap, (deadline_ms, seq))

    def add_run(self, items: list[T], received_ms: int, deadline_ms: int) -> int:
        """Leases for a batch one thread runs in order, held as one (see the class docstring): its entry's sequence
        number, for `run_held` and `settle_run`."""
        if self._keys_of is None:
            raise ValueError("a run's leases need the schedule's keys_of")
        self._seq += 1
        seq = self._seq
        entry = _Entry[K, T]([], items, received_ms, len(items))
        self._entries[seq] = self._runs[seq] = entry
        self._run_live += len(items)
        heapq.heappush(self._heap, (deadline_ms, seq))
        return seq

    def run_held(self, seq: int) -> bool:
        """The run's unsettled messages are still leased as a whole (False once turned into keyed leases)."""
        return seq in self._runs

    def settle_run(self, seq: int, count: int) -> bool:
        """The next `count` messages of the run were settled: forget their leases. False when the run was turned
        into keyed leases meanwhile (the caller removes the keys instead)."""
        entry = self._runs.get(seq)
        if entry is None:
            return False
        entry.done += count
        entry.live -= count
        self._run_live -= count
        if entry.live <= 0:
            del self._runs[seq], self._entries[seq]
        return True

    def unrun(self, seq: int) -> None:
        """Turn a run's unsettled messages into keyed leases of its entry (nothing if it is no run any more)."""
        entry = self._runs.pop(seq, None)
        if entry is None:
            return
        assert self._keys_of is not None  # (checked by `add_run`)
        rest = entry.items[entry.done :]
        keys = self._keys_of(list(rest))
        entry.keys, entry.items, entry.done = keys, rest, 0
        self._run_live -= entry.live
        entry.live = len(keys)
        self.held.update(zip(keys, repeat(seq)))

    def unrun_all(self) -> bool:
        """`unrun` every run; True when there was one."""
        if not self._runs:
            return False
        for seq in list(self._runs):
            self.unrun(seq)
        return True

    def remove(self, key: K) -> bool:
        """Forget a lease (its message was settled); False when it was not held (e.g. it expired)."""
        seq = self.held.pop(key, None)
        if seq is None and self.unrun_all():  # (a key of a run: e.g. its handler raised)
            seq = self.held.pop(key, None)
        if seq is None:
            return False
        self._removed(seq, 1)
        return True

    def remove_all(self, keys: Sequence[K]) -> list[int | None]:
        """`remove` for many keys: for each, its entry's sequence number (true) when it was held, else None. The
        removals run in C (`map`), and the entries are counted down once per entry, not once per key."""
        seqs = list(map(self.held.pop, keys, repeat(None)))
        if None in seqs and self._runs:  # (keys of a run among them)
            for key, seq in zip(keys, seqs, strict=True):
                if seq is not None:
                    self.held[key] = seq
            self.unrun_all()
            seqs = list(map(self.held.pop, keys, repeat(None)))
        if seqs and seqs.count(seqs[0]) == len(seqs):  # mostly: a chunk of one batch (no Counter, ~2 µs)
            if seqs[0] is not None:
                self._removed(seqs[0], len(seqs))
            return seqs
        for seq, count in Counter(seqs).items():
            if seq is not None:
                self._removed(seq, count)
        return seqs

    def _removed(self, seq: int, count: int) -> None:
        entry = self._entries.get(seq)
        if entry is not None:
            entry.live -= count
            if entry.live <= 0:
                del self._entries[seq]

    def clear(self) -> None:
        """Forget every lease."""
        self.held.clear()
        self._entries.clear()
        self._heap.clear()
        self._runs.clear()
        self._run_live = 0

    def __len__(self) -> int:
        return len(self.held) + self._run_live

    def __contains__(self, key: object) -> bool:
        """(A pure read: a run's keys are computed here, not entered.)"""
        if key in self.held:
            return True
        keys_of = self._keys_of
        return keys_of is not None and any(key in keys_of(list(e.items[e.done :])) for e in self._runs.values())

    def items(self) -> list[T]:
        """The items of every lease held."""
        self.unrun_all()
        held = self.held
        return [
            item
            for seq, entry in self._entries.items()
            for key, item in zip(entry.keys, entry.items, strict=True)
            if held.get(key) == seq
        ]

    def next_due_ms(self) -> int | None:
        """When `due` next has something to do (None: nothing held)."""
        heap = self._heap
        while heap and heap[0][1] not in self._entries:
            heapq.heappop(heap)
        return heap[0][0] - self.margin_ms if heap else None

    def due(self, now_ms: int) -> Due[T]:
        """The leases to extend now (their new deadlines applied here) and those that expired."""
        due: Due[T] = Due()
        held, heap, entries = self.held, self._heap, self._entries
        regrouped: dict[tuple[int, int], tuple[list[K], list[T]]] = {}  # (timeout, received) -> leases extended alike
        while heap and heap[0][0] - self.margin_ms <= now_ms:
            _, seq = heapq.heappop(heap)
            self.unrun(seq)  # (a run's rest: keyed from now on; its thread checks and settles them by key)
            entry = entries.pop(seq, None)
            if entry is None:
                continue  # every lease of it was removed
            left_ms = entry.received_ms + self.max_processing_ms - now_ms
            for key, item in zip(entry.keys, entry.items, strict=True):
                if held.get(key) != seq:
                    continue  # removed, or moved to a later entry
                if left_ms <= self.margin_ms:
                    del held[key]
                    due.expired.append(item)
                    continue
                timeout_ms = min(self.extension_ms, left_ms)
                due.extend.append((item, timeout_ms))
                group_keys, group_items = regrouped.setdefault((timeout_ms, entry.received_ms), ([], []))
                group_keys.append(key)
                group_items.append(item)
        for (timeout_ms, received_ms), (group_keys, group_items) in regrouped.items():
            self.add_all(group_keys, group_items, received_ms, now_ms + timeout_ms)
        return due


@dataclass(slots=True)
class _Entry(Generic[K, T]):
    """Leases added together: `live` of them still held (an upper bound: a key moved to a later entry still counts)."""

    keys: Sequence[K]
    items: Sequence[T]
    received_ms: int
    live: int
    done: int = 0  # a run (`LeaseSchedule.add_run`): its first `done` items are settled
