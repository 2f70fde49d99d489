"""`OrderGate`: a `WorkerCore`'s adapter around `OrderedLanes` for `key` and `partition` ordering — what starts when
a message is received or settled, retries in place, dead letters after the last attempt, and per-partition
backpressure (which partitions to pause). No Kafka here: the runtime applies what it decides with its client."""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Protocol

from kmq.config import KmqConfig
from kmq.message import Message
from kmq.worker.config import WorkerConfig
from kmq.worker.leases import LeaseSchedule, lease_key
from kmq.worker.ordering import OrderedLanes, lane_function
from kmq.worker.outcome import Outcome

_log = logging.getLogger(__name__)
PAUSE_AFTER_MS = 500
MIN_RECEIVE_SHARE = 2  # a receive takes at least 1 / this of the partition limit (see `OrderGate.flow`)


class WorkerCore(Protocol):
    """What the gate uses of its `kmq.worker.core.WorkerCore` (which imports this module)."""

    @property
    def lock(self) -> threading.Lock: ...
    @property
    def leases(self) -> LeaseSchedule[int, Message]: ...
    @property
    def held(self) -> deque[Message]: ...
    def record_outcome(self, outcome: Outcome, now: int) -> None: ...
    def wake_if_room(self) -> None: ...

    changes: int


class OrderGate:
    """Every method takes the core's lock: handler threads, the receiving loop and the lease thread all call it."""

    def __init__(self, core: WorkerCore, config: KmqConfig, settings: WorkerConfig) -> None:
        self.core, self.config = core, config
        self.lanes = OrderedLanes(lane_function(settings.ordering))
        self.limit = settings.held_per_partition
        self.paused: set[int] = set()
        self._seen: set[int] = set()
        self._full_since: dict[int, int] = {}  # partition -> since when it holds its limit
        self.room = self.limit  # most messages the next receive may take (see `flow`)
        # The fewest a receive takes: smaller receives cost a START batch, a commit and a fetch's worth of the
        # consumer's time each, so the loop waits for room rather than take a few messages at a time.
        self.min_receive = max(1, self.limit // MIN_RECEIVE_SHARE)
        # Revocations so far: written under the core's lock, read without it by handler threads (an int attribute read
        # is atomic under the GIL) to see that none came since they let a chunk start (`WorkerCore.may_start_marked`).
        self.revocations = 0
        self.revoked_at: dict[int, int] = {}  # partition -> the revocation count its last revocation raised
        # A handler thread runs a received batch in offset order by itself, outside the lanes (see
        # `WorkerCore.admit_ordered`): set and cleared under the core's lock.
        self.in_order = False

    def mark_started(self, messages: list[Message]) -> None:
        """Let a chunk of heads start at once (with the core's lock held). Those whose partition was revoked after
        an earlier marking, before they ran, are dropped with their lease, unsettled, as `revoked` drops what waits:
        the handler thread then finds no lease and starts nothing (`skipped` moves their lanes on)."""
        for msg in self.lanes.start(messages):
            self.drop_unrun(msg)

    def drop_unrun(self, msg: Message) -> None:
        """`msg` was let start, then its partition was revoked before it ran (with the core's lock held): no END,
        no nack, its lease no longer extended — its START runs out and the tracker redelivers it to the partition's
        owner, as for the messages `revoked` drops."""
        self.core.leases.remove(lease_key(msg))
        _log.debug("%s[%d]@%d: partition revoked before it started, dropped", msg.topic, msg.partition, msg.offset)

    def admit(self, messages: list[Message], now_ms: int) -> list[Message]:
        """Received messages (already leased): those that may start now."""
        with self.core.lock:
            return self.lanes.offer(messages, now_ms)

    def finish(self, msg: Message, outcome: Outcome, now_ms: int) -> tuple[Outcome | None, list[Message]]:
        """The handler returned: the outcome to settle (None: nothing to settle, the message is retried in place or
        was given up meanwhile) and the messages that may start now (the next of its lane). A message whose
        partition was revoked while it ran settles as in an unordered worker: a failure is nacked, not retried here."""
        core = self.core
        with core.lock:
            key = lease_key(msg)
            if key not in core.leases.held:
                return None, self.lanes.done(msg, now_ms)  # expired, or given back, while it ran
            core.record_outcome(outcome, now_ms)
            if outcome.kind in ("retry", "failed") and not self.lanes.revoked_while_running(msg):
                if msg.redelivery_count < self.config.max_redeliveries:
                    delay_ms = outcome.delay_ms
                    if delay_ms is None:
                        delay_ms = self.config.nack_delay_ms(msg.redelivery_count)
                    self.lanes.retry(msg._replace(redelivery_count=msg.redelivery_count + 1), now_ms + delay_ms)
                    return None, []
                attempts = msg.redelivery_count + 1
                outcome = Outcome("reject", reason=f"{attempts} attempts failed, the last: {outcome.kind}")
            core.leases.remove(key)
            core.wake_if_room()
            return outcome, self.lanes.done(msg, now_ms)

    def receivable(self) -> bool:
        """Whether the next receive could take `min_receive` messages (with the core's lock held): while it could
        not, a message settled is no reason to wake the receiving loop (it checks again at its next tick)."""
        paused = self.paused
        fullest = max((count for p, count in self.lanes.held.items() if p not in paused), default=0)
        return self.limit - fullest >= self.min_receive

    def advance(self, messages: list[Message], now_ms: int, running: bool = False) -> list[Message]:
        """Messages whose handler returned (the caller holds the core's lock and drops their leases): the next
        messages of their lanes, which may start now (let start at once when `running`)."""
        return self.lanes.done_all(messages, now_ms, running)

    def skipped(self, msg: Message, now_ms: int) -> list[Message]:
        """`may_start` refused `msg`: when it is gone (expired while it waited) its lane moves on."""
        with self.core.lock:
            if lease_key(msg) in self.core.leases.held:
                return []  # held back by the breaker: it starts later, and its lane waits for it
            return self.lanes.done(msg, now_ms)

    def retries_due(self, now_ms: int) -> list[Message]:
        with self.core.lock:
            return self.lanes.due(now_ms)

    def gauges(self) -> tuple[list[int], int, dict[int, int], int]:
        """For the metrics: waits since the last call (ms), keys waiting, messages held per partition (every
        partition held since the start: a partition emptied shows 0), partitions paused."""
        with self.core.lock:
            for partition in self.lanes.held:
                self._seen.add(partition)
            held = {partition: self.lanes.held.get(partition, 0) for partition in self._seen}
            return self.lanes.take_waits_ms(), self.lanes.keys_waiting, held, len(self.paused)

    def holding(self) -> bool:
        """Any message in a lane (running, waiting or retrying), or a batch running in order."""
        with self.core.lock:
            return bool(self.lanes.held) or self.in_order

    def give_back(self) -> list[Message]:
        """Shutdown: every message waiting (behind its lane or for a retry), its lease dropped; the caller nacks."""
        with self.core.lock:
            given = self.lanes.give_back()
            for msg in given:
                self.core.leases.remove(lease_key(msg))
            return given

    def revoked(self, partitions: set[int]) -> list[Message]:
        """The group took `partitions` away (the client's revocation callback, before the next owner reads them):
        their messages that are not running are dropped from the lanes and their leases, unsettled — no END, no
        nack: no longer extended, their STARTs run out and the tracker redelivers them to the partition's owner.
        Running handlers finish and settle as in an unordered worker. Returns the messages dropped."""
        with self.core.lock:
            self.revocations += 1  # heads let start but not yet run: dropped before they run (`drop_unrun`)
            self.revoked_at.update(dict.fromkeys(partitions, self.revocations))  # (see `hand_over_locked`)
            self.core.changes += 1  # (quick chunks then check each message)
            dropped = self.lanes.revoke(partitions)
            for msg in dropped:
                self.core.leases.remove(lease_key(msg))
            held = self.core.held  # heads the breaker holds back: dropped above, they leave its queue too
            kept = [msg for msg in held if msg.partition not in partitions]
            if len(kept) != len(held):
                held.clear()
                held.extend(kept)
            for partition in partitions:
                self._full_since.pop(partition, None)
            self.core.wake_if_room()
        if dropped:
            _log.info(
                "partitions %s revoked: %d waiting messages dropped, redelivered once their leases run out",
                sorted(partitions),
                len(dropped),
            )
        return dropped

    def flow(self, now_ms: int) -> tuple[set[int], set[int]]:
        """Backpressure, once per loop turn: (partitions to pause, partitions to resume), and `room`, the most
        messages the next receive may take. No receive takes a partition past its limit, and none takes fewer than
        `min_receive` (the loop waits for room instead). A partition is full when it has no room for that many; one
        full for `PAUSE_AFTER_MS` pauses (a full one that drains at once is not: pausing drops what the consumer
        fetched ahead, and a receive returns a partition's messages in runs, which fill it for a moment), and resumes
        once down to half. Pausing is asserted again every turn: a partition assigned anew fetches again."""
        with self.core.lock:
            held = self.lanes.held
            full_now = {p for p, count in held.items() if count > self.limit - self.min_receive}
            self._full_since = {p: self._full_since.get(p, now_ms) for p in full_now}
            full = {p for p, since in self._full_since.items() if now_ms - since >= PAUSE_AFTER_MS}
            resume = {p for p in self.paused if held.get(p, 0) <= self.limit // 2}
            self.paused = (self.paused - resume) | full
            fullest = max((count for p, count in held.items() if p not in self.paused), default=0)
            self.room = max(0, self.limit - fullest)
            return full, resume - full
