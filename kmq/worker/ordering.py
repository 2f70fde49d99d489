"""`OrderedLanes`: which held messages may start under key or partition ordering (pure: takes `now_ms`, never touches
a client or the clock).

A lane is what must run one at a time, in offset order: a partition (`partition` ordering) or a key within a partition
(`key` ordering). The head of a lane is running, or waiting for its in-place retry; the rest wait behind it.
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterable
from enum import StrEnum
from typing import Generic, TypeVar

from kmq.message import Message

T = TypeVar("T")
Lane = Hashable


class Ordering(StrEnum):
    NONE = "none"  # any order, any number of a partition at once
    PARTITION = "partition"  # one message of a partition at a time, in offset order
    KEY = "key"  # one message of a key (within its partition) at a time, in offset order


class _Lane(Generic[T]):
    """A plain class, not a dataclass: one is made per message that finds its lane idle, and a dataclass's
    `default_factory` made that cost twice as much as the rest of `offer`. Its queue is made only once an item waits
    behind the head: most lanes never have one (a deque is the largest object here, and the collector tracks it)."""

    __slots__ = ("head", "retry_at_ms", "revoked", "running", "waiting")

    def __init__(self, head: T, running: bool) -> None:
        self.waiting: deque[tuple[T, int]] | None = None  # (item, since_ms) behind the head, offset order
        self.head: T | None = head  # running, or about to (handed to a handler), or waiting for its retry
        self.retry_at_ms: int | None = None  # set while the head waits for its retry
        self.running = running  # the head's handler was let start (`started`, or `offer` with `running`)
        self.revoked = False  # the head's partition was revoked while it ran (`revoke`)


class OrderedLanes:
    """Messages enter with `offer` and leave with `done` (or `retry`, which keeps the lane); each returns the messages
    that may start now. `lane_of` names a message's lane (see `lane_function`)."""

    def __init__(self, lane_of: Callable[[Message], Lane]) -> None:
        self._lane_of = lane_of
        self._lanes_of = _LANES_OF.get(lane_of) or (lambda items: [lane_of(item) for item in items])
        self._lanes: dict[Hashable, _Lane[Message]] = {}
        self._retries: list[tuple[int, int, Hashable]] = []  # (retry_at_ms, sequence, lane) heap
        self._seq = 0
        self.held: Counter[int] = Counter()  # partition -> items in lanes (running, retrying, waiting)
        # How long each item that waited behind its lane's head waited before it started (drained by the caller). An
        # item that started at once is not counted: a histogram observation per message would cost more than the rest.
        self.waits_ms: list[int] = []

    def lanes_of(self, items: list[Message]) -> list[Lane]:
        """The items' lanes (for `offer`; no state read: callers compute them before taking their lock)."""
        return self._lanes_of(items)

    def offer(
        self, items: Iterable[Message], now_ms: int, lanes_of: list[Lane] | None = None, running: bool = False
    ) -> list[Message]:
        """Received items, in offset order per partition: those that may start now (their lane was idle), let start
        at once (`started`) when `running`. `lanes_of`: their lanes, when computed already (`lanes_of`)."""
        startable = []
        lanes, items = self._lanes, list(items)
        # The lanes computed in one comprehension, not one call per item: on the receiving thread, each call is also
        # a point where a handler thread waiting for the GIL takes it over
        for key, item in zip(self._lanes_of(items) if lanes_of is None else lanes_of, items, strict=True):
            lane = lanes.get(key)
            if lane is None:
                lanes[key] = _Lane(item, running)
                startable.append(item)
            elif lane.waiting is None:
                lane.waiting = deque([(item, now_ms)])
            else:
                lane.waiting.append((item, now_ms))
        self.held.update([item.partition for item in items])
        return startable

    def done(self, item: Message, now_ms: int) -> list[Message]:
        """`item`, its lane's head, finished (settled, or given up): the next item of its lane, if any, may start."""
        return self.done_all([item], now_ms)

    def done_all(self, items: list[Message], now_ms: int, running: bool = False) -> list[Message]:
        """`done` for each of `items` (a chunk whose handlers returned), in one loop: the items that may start now,
        let start at once (`started`) when `running` (a new head was never revoked: nothing to drop)."""
        following: list[Message] = []
        lanes, held, waits = self._lanes, self.held, self.waits_ms
        for key, item in zip(self._lanes_of(items), items, strict=True):
            lane = lanes.get(key)
            if lane is None or lane.head is None or lane.head.offset != item.offset:
                continue  # not its lane's head: given back meanwhile
            partition = item.partition  # `_forget`, inlined: a call per message costs as much as the rest
            left = held[partition] - 1
            if left > 0:
                held[partition] = left
            else:
                del held[partition]
            waiting = lane.waiting
            if not waiting:
                del lanes[key]
                continue
            lane.retry_at_ms = None
            lane.head, since_ms = waiting.popleft()  # received after any revocation of the head before it
            lane.running, lane.revoked = running, False
            waits.append(max(0, now_ms - since_ms))
            following.append(lane.head)
        return following

    def retry(self, again: Message, at_ms: int) -> None:
        """The head failed and runs again (as `again`) at `at_ms`; its lane's later items keep waiting."""
        key = self._lane_of(again)
        lane = self._lanes[key]
        lane.head, lane.retry_at_ms, lane.running = again, at_ms, False
        self._seq += 1
        heapq.heappush(self._retries, (at_ms, self._seq, key))

    def due(self, now_ms: int) -> list[Message]:
        """Heads whose retry time has come: they start again now."""
        started = []
        while self._retries and self._retries[0][0] <= now_ms:
            at_ms, _, key = heapq.heappop(self._retries)
            lane = self._lanes.get(key)
            if lane is not None and lane.retry_at_ms == at_ms and lane.head is not None:
                lane.retry_at_ms = None
                started.append(lane.head)
        return started

    def started(self, item: Message, running: bool = True) -> None:
        """`item`, its lane's head, is let start: a revocation now leaves it to finish (`revoke`). `running=False`:
        held back after all (the breaker opened): a revocation drops it again."""
        lane = self._lanes.get(self._lane_of(item))
        if lane is not None and lane.head is not None and lane.head.offset == item.offset:
            lane.running = running

    def start(self, items: Iterable[Message]) -> list[Message]:
        """`started` for a chunk of heads at once; returns those whose lane was revoked since they were last let
        start, before they ran (the caller drops them, as `revoke` would have): they must not start now."""
        revoked, lanes, lane_of = [], self._lanes, self._lane_of
        for item in items:
            lane = lanes.get(lane_of(item))
            if lane is not None and lane.head is not None and lane.head.offset == item.offset:
                if lane.revoked:
                    revoked.append(item)
                else:
                    lane.running = True
        return revoked

    def revoke(self, partitions: set[int]) -> list[Message]:
        """The partitions were taken away: every item of theirs that is not running, removed and returned (waiting
        behind its head, waiting for its retry, or a head handed on but not let start yet). A lane whose head runs
        keeps only the head: its `done` then starts nothing."""
        dropped: list[Message] = []
        for key, lane in list(self._lanes.items()):
            if lane.head is None or lane.head.partition not in partitions:
                continue
            dropped += [item for item, _ in lane.waiting or ()]
            lane.waiting = None
            if not lane.running:
                dropped.append(lane.head)
                del self._lanes[key]
            else:
                lane.revoked = True
        for item in dropped:
            self._forget(item)
        return dropped

    def revoked_while_running(self, item: Message) -> bool:
        """`item`, its lane's head, ran while its partition was revoked: it is not retried in place (this worker may
        no longer own the partition), it settles as in an unordered worker."""
        lane = self._lanes.get(self._lane_of(item))
        return lane is not None and lane.revoked and lane.head is not None and lane.head.offset == item.offset

    def give_back(self, partitions: set[int] | None = None) -> list[Message]:
        """Every item that is not running (waiting, or waiting for a retry), of `partitions` (None: all), removed.
        Lanes whose head runs keep only the head; its `done` then starts nothing."""
        given: list[Message] = []
        for key, lane in list(self._lanes.items()):
            if lane.head is None or (partitions is not None and lane.head.partition not in partitions):
                continue
            given += [item for item, _ in lane.waiting or ()]
            lane.waiting = None
            if lane.retry_at_ms is not None:
                given.append(lane.head)
                del self._lanes[key]
        for item in given:
            self._forget(item)
        return given

    @property
    def keys_waiting(self) -> int:
        """Lanes with items waiting behind their head."""
        return sum(1 for lane in self._lanes.values() if lane.waiting)

    @property
    def waiting(self) -> int:
        return sum(len(lane.waiting) for lane in self._lanes.values() if lane.waiting)

    def take_waits_ms(self) -> list[int]:
        waits, self.waits_ms = self.waits_ms, []
        return waits

    def _forget(self, item: Message) -> None:
        held, partition = self.held, item.partition
        left = held[partition] - 1
        if left > 0:
            held[partition] = left
        else:
            del held[partition]


def lane_function(ordering: Ordering) -> Callable[[Message], Lane]:
    """A message's lane: its partition, or (partition, key); a message without a key is a lane of its own."""
    if ordering is Ordering.PARTITION:
        return _partition_lane
    return _key_lane


def _partition_lane(msg: Message) -> Lane:
    return msg.partition


def _key_lane(msg: Message) -> Lane:
    return (msg.partition, msg.key) if msg.key is not None else (msg.partition, None, msg.offset)


def _partition_lanes(items: list[Message]) -> list[Lane]:
    return [msg.partition for msg in items]


def _key_lanes(items: list[Message]) -> list[Lane]:
    return [(m.partition, m.key) if m.key is not None else (m.partition, None, m.offset) for m in items]


# `lane_function`'s lanes for a list of items at once (`OrderedLanes.offer`)
_LANES_OF: dict[Callable[[Message], Lane], Callable[[list[Message]], list[Lane]]] = {
    _partition_lane: _partition_lanes,
    _key_lane: _key_lanes,
}
