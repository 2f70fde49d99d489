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
from itertools import compress, repeat
from operator import is_, is_not, itemgetter, not_, sub

from kmq.message import Message

Lane = Hashable


class Ordering(StrEnum):
    NONE = "none"  # any order, any number of a partition at once
    PARTITION = "partition"  # one message of a partition at a time, in offset order
    KEY = "key"  # one message of a key (within its partition) at a time, in offset order


class OrderedLanes:
    """Messages enter with `offer` and leave with `done` (or `retry`, which keeps the lane); each returns the messages
    that may start now. `lane_of` names a message's lane (see `lane_function`).

    A lane is its head in `_heads`, and nothing more while the head runs with nothing behind it (most lanes, most of
    the time): the rest of a lane's state lives in side tables that hold only the lanes it applies to (items waiting
    behind the head, a retry pending, a head not let start, a head revoked while it ran). So offering and finishing
    runs in C for whole chunks (`map` over dict methods, set operations) while those tables are empty or apart from
    the chunk's lanes: Python code runs only per message that waits behind a busy lane, or that leaves one."""

    def __init__(self, lane_of: Callable[[Message], Lane]) -> None:
        self._lane_of = lane_of
        self._lanes_of = _LANES_OF.get(lane_of) or (lambda items: [lane_of(item) for item in items])
        # A getter of the lane of an item with a key, for `map` (None: `lane_of` only)
        self._keyed_lane = _KEYED_LANE.get(lane_of)
        self._heads: dict[Lane, Message] = {}  # every lane's head: running, about to (handed on), or retrying
        # Items waiting behind their lane's head, as (item, since_ms): the first in `_next` (mostly the only one: a
        # tuple each, made and moved in C), any further ones in `_later` (only for lanes in `_next`; never empty)
        self._next: dict[Lane, tuple[Message, int]] = {}
        self._later: dict[Lane, deque[tuple[Message, int]]] = {}
        self._retry_at: dict[Lane, int] = {}  # lanes whose head waits for its retry (`retry`, until `due`)
        self._unstarted: set[Lane] = set()  # lanes whose head was not let start (`started`; `offer` without `running`)
        self._revoked: set[Lane] = set()  # lanes whose head's partition was revoked while it ran (`revoke`)
        self._retries: list[tuple[int, int, Lane]] = []  # (retry_at_ms, sequence, lane) heap
        self._seq = 0
        self._held: Counter[int] = Counter()  # partition -> items offered, less those released before the last `held`
        self._released: list[int] = []  # the partitions of the items that left since (added to in C, read seldom)
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
        items = list(items)
        lanes = self._lanes_of(items) if lanes_of is None else lanes_of
        if len(lanes) != len(items):
            raise ValueError(f"{len(lanes)} lanes for {len(items)} items")
        # Each lane's head, set where it had none (in C): an item is a head when that is itself, else it waits (its
        # lane was busy, or an earlier item of this batch took it)
        heads = list(map(self._heads.setdefault, lanes, items))
        self._held.update(map(_PARTITION, items))
        if all(map(is_, heads, items)):
            if not running:
                self._unstarted.update(lanes)
            return items
        stale = list(map(is_not, heads, items))
        waiting = list(compress(lanes, stale))
        behind = list(zip(compress(items, stale), repeat(now_ms)))
        nexts = list(map(self._next.setdefault, waiting, behind))  # first in line where none waited yet
        if not all(map(is_, nexts, behind)):
            later = self._later
            for lane, entry, first in zip(waiting, behind, nexts, strict=True):
                if first is not entry:
                    queue = later.get(lane)
                    if queue is None:
                        later[lane] = deque([entry])
                    else:
                        queue.append(entry)
        fresh = list(map(not_, stale))
        if not running:
            self._unstarted.update(compress(lanes, fresh))
        return list(compress(items, fresh))

    def done(self, item: Message, now_ms: int) -> list[Message]:
        """`item`, its lane's head, finished (settled, or given up): the next item of its lane, if any, may start."""
        return self.done_all([item], now_ms)

    def done_all(self, items: list[Message], now_ms: int, running: bool = False) -> list[Message]:
        """`done` for each of `items` (a chunk whose handlers returned), in one go: the items that may start now,
        let start at once (`started`) when `running` (a new head was never revoked: nothing to drop)."""
        # The lanes of items with a key (a lane of its own for one without: its lane here is no lane's, and it
        # finds no head below, so the chunk goes item by item, with the lanes computed in full)
        lanes = self._lanes_of(items) if self._keyed_lane is None else list(map(self._keyed_lane, items))
        unstarted, revoked, retry_at = self._unstarted, self._revoked, self._retry_at  # mostly all empty
        if (
            (unstarted and not unstarted.isdisjoint(lanes))
            or (revoked and not revoked.isdisjoint(lanes))
            or (retry_at and not retry_at.keys().isdisjoint(lanes))
        ):
            return self._done_each(self._lanes_of(items), items, now_ms, running)
        heads = self._heads
        popped = list(map(heads.pop, lanes, repeat(None)))
        if not all(map(is_, popped, items)):  # some not their lane's head (given back meanwhile), or twice here
            heads.update(
                (lane, head) for lane, head in zip(lanes, popped, strict=True) if head is not None
            )  # as they were
            return self._done_each(self._lanes_of(items), items, now_ms, running)
        released = self._released
        released += map(_PARTITION, items)
        if len(released) > _FOLD_AT:
            self._fold()
        nexts = self._next
        if not nexts:
            return []
        entries = list(map(nexts.pop, lanes, repeat(None)))  # each received after any revocation of the head
        if not any(entries):
            return []
        moving = list(compress(lanes, entries))  # (in the items' order)
        waited = list(filter(None, entries))
        following = list(map(_ITEM, waited))
        heads.update(zip(moving, following, strict=True))
        self.waits_ms += map(max, repeat(0), map(sub, repeat(now_ms), map(_SINCE, waited)))
        later = self._later
        if later and not later.keys().isdisjoint(moving):
            for lane in moving:
                self._move_up(lane)
        if not running:
            self._unstarted.update(moving)
        return following

    def _move_up(self, lane: Lane) -> None:
        """The lane's first waiting item became its head: the next behind it, if any, is first in line now."""
        queue = self._later.get(lane)
        if queue is not None:
            self._next[lane] = queue.popleft()
            if not queue:
                del self._later[lane]

    def _done_each(self, lanes: list[Lane], items: list[Message], now_ms: int, running: bool) -> list[Message]:
        """`done_all` item by item: any lane, in any state."""
        following: list[Message] = []
        heads, nexts, unstarted, waits = self._heads, self._next, self._unstarted, self.waits_ms
        for lane, item in zip(lanes, items, strict=True):
            head = heads.get(lane)
            if head is None or head.offset != item.offset:
                continue  # not its lane's head: given back meanwhile
            self._forget(item)
            self._retry_at.pop(lane, None)
            self._revoked.discard(lane)
            entry = nexts.pop(lane, None)
            if entry is None:
                del heads[lane]
                unstarted.discard(lane)
                continue
            head, since_ms = entry  # received after any revocation of the head before it
            self._move_up(lane)
            heads[lane] = head
            if running:
                unstarted.discard(lane)
            else:
                unstarted.add(lane)
            waits.append(max(0, now_ms - since_ms))
            following.append(head)
        return following

    def retry(self, again: Message, at_ms: int) -> None:
        """The head failed and runs again (as `again`) at `at_ms`; its lane's later items keep waiting."""
        lane = self._lane_of(again)
        if lane not in self._heads:
            raise KeyError(lane)
        self._heads[lane] = again
        self._retry_at[lane] = at_ms
        self._unstarted.add(lane)
        self._seq += 1
        heapq.heappush(self._retries, (at_ms, self._seq, lane))

    def due(self, now_ms: int) -> list[Message]:
        """Heads whose retry time has come: they start again now."""
        started = []
        retry_at, heads = self._retry_at, self._heads
        while self._retries and self._retries[0][0] <= now_ms:
            at_ms, _, lane = heapq.heappop(self._retries)
            if retry_at.get(lane) == at_ms and lane in heads:
                del retry_at[lane]
                started.append(heads[lane])
        return started

    def started(self, item: Message, running: bool = True) -> None:
        """`item`, its lane's head, is let start: a revocation now leaves it to finish (`revoke`). `running=False`:
        held back after all (the breaker opened): a revocation drops it again."""
        lane = self._lane_of(item)
        head = self._heads.get(lane)
        if head is not None and head.offset == item.offset:
            if running:
                self._unstarted.discard(lane)
            else:
                self._unstarted.add(lane)

    def start(self, items: Iterable[Message]) -> list[Message]:
        """`started` for a chunk of heads at once; returns those whose lane was revoked since they were last let
        start, before they ran (the caller drops them, as `revoke` would have): they must not start now."""
        unstarted, revoked_lanes = self._unstarted, self._revoked
        if not unstarted and not revoked_lanes:
            return []  # every head was let start already, none revoked: nothing changes
        revoked, heads, lane_of = [], self._heads, self._lane_of
        for item in items:
            lane = lane_of(item)
            head = heads.get(lane)
            if head is not None and head.offset == item.offset:
                if lane in revoked_lanes:
                    revoked.append(item)
                else:
                    unstarted.discard(lane)
        return revoked

    def revoke(self, partitions: set[int]) -> list[Message]:
        """The partitions were taken away: every item of theirs that is not running, removed and returned (waiting
        behind its head, waiting for its retry, or a head handed on but not let start yet). A lane whose head runs
        keeps only the head: its `done` then starts nothing."""
        dropped: list[Message] = []
        for lane, head in list(self._heads.items()):
            if head.partition not in partitions:
                continue
            dropped += self._take_waiting(lane)
            if lane in self._unstarted:
                dropped.append(head)
                self._remove(lane)
            else:
                self._revoked.add(lane)
        for item in dropped:
            self._forget(item)
        return dropped

    def revoked_while_running(self, item: Message) -> bool:
        """`item`, its lane's head, ran while its partition was revoked: it is not retried in place (this worker may
        no longer own the partition), it settles as in an unordered worker."""
        lane = self._lane_of(item)
        head = self._heads.get(lane)
        return lane in self._revoked and head is not None and head.offset == item.offset

    def give_back(self, partitions: set[int] | None = None) -> list[Message]:
        """Every item that is not running (waiting, or waiting for a retry), of `partitions` (None: all), removed.
        Lanes whose head runs keep only the head; its `done` then starts nothing."""
        given: list[Message] = []
        for lane, head in list(self._heads.items()):
            if partitions is not None and head.partition not in partitions:
                continue
            given += self._take_waiting(lane)
            if lane in self._retry_at:
                given.append(head)
                self._remove(lane)
        for item in given:
            self._forget(item)
        return given

    @property
    def idle(self) -> bool:
        """No lane holds anything: nothing runs, waits or waits for a retry."""
        return not self._heads

    @property
    def keys_waiting(self) -> int:
        """Lanes with items waiting behind their head."""
        return len(self._next)

    @property
    def waiting(self) -> int:
        return len(self._next) + sum(map(len, self._later.values()))

    def take_waits_ms(self) -> list[int]:
        waits, self.waits_ms = self.waits_ms, []
        return waits

    def _take_waiting(self, lane: Lane) -> list[Message]:
        """The items waiting behind the lane's head, removed from it."""
        first = self._next.pop(lane, None)
        if first is None:
            return []
        return [first[0], *(item for item, _ in self._later.pop(lane, ()))]

    def _remove(self, lane: Lane) -> None:
        """Forget a lane whose head is removed (its waiting items taken already)."""
        del self._heads[lane]
        self._retry_at.pop(lane, None)
        self._unstarted.discard(lane)
        self._revoked.discard(lane)

    @property
    def held(self) -> Counter[int]:
        """Partition -> items in lanes (running, retrying, waiting); a partition that holds none is absent."""
        if self._released:
            self._fold()
        return self._held

    def _fold(self) -> None:
        """The items that left since, subtracted from `held`: per partition, counted in C."""
        released, held = self._released, self._held
        counts = Counter(released) if len(held) > _FEW_PARTITIONS else {p: released.count(p) for p in held}
        for partition, count in counts.items():
            if count:
                left = held[partition] - count
                if left > 0:
                    held[partition] = left
                else:
                    del held[partition]
        released.clear()

    def _forget(self, item: Message) -> None:
        released = self._released
        released.append(item.partition)
        if len(released) > _FOLD_AT:
            self._fold()


def lane_function(ordering: Ordering) -> Callable[[Message], Lane]:
    """A message's lane: its partition, or (partition, key); a message without a key is a lane of its own."""
    if ordering is Ordering.PARTITION:
        return _partition_lane
    return _key_lane


def _partition_lane(msg: Message) -> Lane:
    return msg.partition


def _key_lane(msg: Message) -> Lane:
    return (msg.partition, msg.key) if msg.key is not None else (msg.partition, None, msg.offset)


_FOLD_AT = 4096  # partitions of items that left, kept before `held` is read
_FEW_PARTITIONS = 8  # `held` counts with one `list.count` per partition up to this many (else a `Counter`)
_PARTITION = itemgetter(3)  # a `Message`'s fields by index: `map` over these runs in C
_KEY = itemgetter(1)
_ITEM, _SINCE = itemgetter(0), itemgetter(1)  # of an (item, since_ms) waiting in a lane
_PARTITION_KEY = itemgetter(3, 1)


def _partition_lanes(items: list[Message]) -> list[Lane]:
    return list(map(_PARTITION, items))


def _key_lanes(items: list[Message]) -> list[Lane]:
    if all(map(_KEY, items)):  # no key is None (nor empty): each lane is (partition, key), made in C
        return list(map(_PARTITION_KEY, items))
    return [(m.partition, m.key) if m.key is not None else (m.partition, None, m.offset) for m in items]


# `lane_function`'s lanes for a list of items at once (`OrderedLanes.offer`)
_LANES_OF: dict[Callable[[Message], Lane], Callable[[list[Message]], list[Lane]]] = {
    _partition_lane: _partition_lanes,
    _key_lane: _key_lanes,
}
# `lane_function`'s lane of an item with a key (quicker: no check for one without)
_KEYED_LANE: dict[Callable[[Message], Lane], Callable[[Message], Lane]] = {
    _partition_lane: _PARTITION,
    _key_lane: _PARTITION_KEY,
}
