"""`WorkerCore`: the state a worker's receiving loop shares with its handlers — leases, the circuit breaker, counts —
under one lock. No Kafka here: callers apply what it decides with their client (sync or async)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from itertools import compress

from kmq.config import KmqConfig
from kmq.message import Message
from kmq.progress import ProgressWatch
from kmq.worker.breaker import BreakerState, CircuitBreaker, Transition
from kmq.worker.config import WorkerConfig
from kmq.worker.leases import Due, LeaseSchedule, lease_key, lease_keys
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.ordered import OrderGate
from kmq.worker.ordering import Ordering
from kmq.worker.outcome import OK, Outcome

_log = logging.getLogger(__name__)
RETRY_NOW = Outcome("retry", 0)  # shutdown: a message not finished comes back at once
_TALLY = {"ok": "processed", "retry": "retried", "failed": "failed", "reject": "rejected"}

_SETTLED = ("processed", "retried", "failed", "rejected", "expired")  # outcomes that are progress
UNMARKED = -1  # a chunk not let start in one go (breaker not closed): each message takes the lock in `may_start`


def now_ms() -> int:
    """Wall-clock ms: leases compare with `Message.deadline_ms`, which the client takes from the wall clock."""
    return time.time_ns() // 1_000_000


class WorkerCore:
    """Counts `outstanding` messages (received, not settled) against `capacity`."""

    def __init__(self, config: KmqConfig, settings: WorkerConfig, metrics: WorkerMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.lock = threading.Lock()
        self.leases: LeaseSchedule[int, Message] = LeaseSchedule(
            settings.margin_ms(config.msg_timeout_ms),
            settings.extension_ms(config.msg_timeout_ms),
            settings.max_processing_ms,
            keys_of=lease_keys,
        )
        self.breaker = CircuitBreaker(
            settings.breaker_window_ms,
            settings.breaker_threshold,
            settings.breaker_min_calls,
            settings.breaker_backoff_ms,
            settings.breaker_backoff_max_ms,
            settings.breaker_probes,
        )
        self.capacity = settings.capacity
        self.refill = max(1, self.capacity // 2)
        self.held: deque[Message] = deque()  # received, waiting for the breaker to let them start
        self.tallies: Counter[str] = Counter()  # the rarer outcomes; `processed` apart, as an int (hot path)
        self.processed = 0
        self._unrecorded_ok = 0
        self.wake = threading.Event()  # set when the loop may receive again
        self.progress = ProgressWatch(f"worker on {config.queue_topic}", settings.stall_timeout_ms)
        metrics.last_progress.labels(metrics.topic).set_function(self.progress.last_progress_s)
        self.notify: Callable[[], None] = self.wake.set  # the async path wakes its loop instead
        # Raised (under `lock`) by whatever can stop a message of a quick chunk from starting: a breaker transition,
        # a lease expiry, a revocation, the shutdown. Read without the lock before each message of a quick chunk.
        self.changes = 0
        # Key or partition ordering: what may start, in-place retries, per-partition backpressure (None: any order).
        self.gate = OrderGate(self, config, settings) if settings.ordering is not Ordering.NONE else None

    @property
    def outstanding(self) -> int:
        return len(self.leases)

    def admit(self, messages: list[Message], now_ms: int, keys: list[int] | None = None) -> list[Message]:
        """A received batch (its messages share one deadline): the messages that may start now (all of them unless
        ordered: then those whose lane was idle). `keys`: their `lease_keys`, when the caller has them already."""
        if not messages:
            return messages
        keys = lease_keys(messages) if keys is None else keys
        with self.lock:
            self.leases.add_all(keys, messages, now_ms, messages[0].deadline_ms)
        return messages if self.gate is None else self.gate.admit(messages, now_ms)

    def admit_run(self, messages: list[Message], now_ms: int) -> int:
        """`admit` for a batch that the receiving handler thread runs through itself, unordered
        (`HandlerThreads._run_batch`): leased as a whole (`LeaseSchedule.add_run`), with no key per message unless
        something turns it into keyed leases. Returns the run's lease (its sequence number)."""
        with self.lock:
            return self.leases.add_run(messages, now_ms, messages[0].deadline_ms)

    def settle_run_ok(self, run_lease: int, messages: list[Message]) -> list[Message]:
        """`settle_ok` for the next messages of a run leased as a whole (with `lock` held), by key once the run was
        turned into keyed leases."""
        if not self.leases.settle_run(run_lease, len(messages)):
            return self.settle_ok(messages, lease_keys(messages))
        self._count_ok(messages)
        return messages

    def admit_ordered(
        self, messages: list[Message], now_ms: int, in_order: bool = False
    ) -> tuple[list[Message], int, list[int] | None, int | None]:
        """`admit` for the thread path under ordering, in one lock (the lanes computed before it): the messages
        that may start now, let start at once while the breaker is closed, their mark for `may_start_marked`
        (UNMARKED when the breaker is not closed: nothing marked), their `lease_keys` (None for a run in order),
        and, when the caller runs them in order, the run's lease (`LeaseSchedule.add_run`; else None).

        `in_order`: the caller (a handler thread's receiving turn, quick handlers) would run the whole batch itself,
        in offset order (`HandlerThreads._run_batch`, which nothing is received beside). That keeps every key's order
        with no lane bookkeeping, and is taken when no lane holds anything and the breaker is closed: nothing else
        runs or waits meanwhile. The batch is then leased as a whole (as `admit_run`), the gate's `in_order` set,
        and all of it returned, with the revocation count as its mark (see `hand_over_locked`)."""
        gate = self.gate
        assert gate is not None
        if not messages:
            return messages, UNMARKED, [], None
        in_order = in_order and gate.lanes.idle and not gate.in_order  # (a hint here: decided under the lock)
        lanes = None if in_order else gate.lanes.lanes_of(messages)
        keys = None if in_order else lease_keys(messages)
        deadline_ms = messages[0].deadline_ms
        with self.lock:
            closed = self.breaker.state is BreakerState.CLOSED
            if in_order and closed and gate.lanes.idle and not gate.in_order:
                gate.in_order = True
                return messages, gate.revocations, None, self.leases.add_run(messages, now_ms, deadline_ms)
            if keys is None:
                keys = lease_keys(messages)
            self.leases.add_all(keys, messages, now_ms, deadline_ms)
            heads = gate.lanes.offer(messages, now_ms, lanes, running=closed)
            mark = gate.revocations if closed else UNMARKED
        return heads, mark, keys if len(heads) == len(keys) else lease_keys(heads), None

    def hand_over_locked(
        self, rest: list[Message], mark: int, now_ms: int, first_ran: bool = False
    ) -> tuple[list[Message], int]:
        """With `lock` held: a batch run in order (`admit_ordered`) stops before `rest` (its first may have run, or
        be running: a handler raised on it, or the run was taken over), which enters the lanes as a batch received
        now would, and the run ends. Those of partitions revoked since the run's `mark` are dropped, unsettled, as
        the lanes drop what waits (`OrderGate.revoked`). `first_ran`: the first of `rest` ran or runs; kept, it is its
        lane's head, let start whatever the breaker, and its thread finishes it. Returns the messages that may start
        now (let start while the breaker is closed; that first one among them when kept) and their mark. The run's
        leases are keyed already (`HandlerThreads.take_over` turns them so first)."""
        gate = self.gate
        assert gate is not None
        gate.in_order = False
        first = rest[0] if rest else None
        if gate.revocations != mark:
            revoked_at = gate.revoked_at
            for msg in rest:
                if revoked_at.get(msg.partition, mark) > mark:
                    gate.drop_unrun(msg)
            rest = [msg for msg in rest if revoked_at.get(msg.partition, mark) <= mark]
        closed = self.breaker.state is BreakerState.CLOSED
        heads = []
        if rest and first_ran and rest[0] is first:  # it ran or runs: started whatever the breaker (unless revoked)
            heads = gate.lanes.offer(rest[:1], now_ms, running=True)
            rest = rest[1:]
        heads += gate.lanes.offer(rest, now_ms, running=closed)
        self.wake_if_room()
        return heads, gate.revocations if closed else UNMARKED

    def may_start(self, msg: Message) -> bool:
        """True when the handler may run now; else the message is held (or was given up while it waited).

        Ordered: decided under the lock, and the lane's head marked running there, so that a revocation
        (`OrderGate.revoked`) either comes first and drops it, or comes after and lets it finish."""
        if self.gate is not None:
            return self._may_start_ordered(msg, self.gate)
        if self.breaker.state is BreakerState.CLOSED:  # read unlocked: at worst one more starts as it opens
            return lease_key(msg) in self.leases.held
        with self.lock:
            if lease_key(msg) not in self.leases.held:
                return False  # expired or abandoned while it waited
            permits = self.breaker.permits()
            if permits is None:
                return True  # closed meanwhile
            if permits == 0:
                self.held.append(msg)
                return False
            self.breaker.probing(1)
            return True

    def start_ordered(self, chunk: list[Message]) -> int:
        """Ordered: let a chunk's heads start under one lock (one per message had the handler threads queue behind
        each other for it); each is then checked without the lock before it runs (`may_start_marked`). Returns the
        chunk's mark for that check."""
        assert self.gate is not None
        with self.lock:
            return self._mark(chunk, self.gate)

    def _mark(self, chunk: list[Message], gate: OrderGate) -> int:
        """With `lock` held: the heads marked started (lanes revoked since an earlier marking dropped) and the
        gate's revocation count now; UNMARKED, marking nothing, unless the breaker is closed."""
        if self.breaker.state is not BreakerState.CLOSED:
            return UNMARKED
        gate.mark_started(chunk)
        return gate.revocations

    def may_start_marked(self, msg: Message, mark: int) -> bool:
        """`may_start` for a message of a chunk marked started (`start_ordered`, `finish_ordered`) with `mark`.

        Without the lock while nothing changed since the marking: no revocation (the gate's count, written under
        the lock, is read here without it), the breaker still closed, the lease still held. Else decided under the
        lock: a head whose partition was revoked after its marking is dropped there and does not start. A revocation
        after this check finds the message running: it finishes, as one that started under the lock would."""
        gate = self.gate
        assert gate is not None
        if mark == gate.revocations and self.breaker.state is BreakerState.CLOSED:
            return lease_key(msg) in self.leases.held
        return self._may_start_ordered(msg, gate)

    def _may_start_ordered(self, msg: Message, gate: OrderGate) -> bool:
        with self.lock:
            if lease_key(msg) not in self.leases.held:
                return False  # expired, given back or revoked while it waited
            if gate.lanes.revoked_while_running(msg):  # marked started, revoked before it ran: it must not run now
                gate.drop_unrun(msg)
                self.wake_if_room()
                return False
            permits = self.breaker.permits()
            if permits == 0:
                gate.lanes.started(msg, running=False)  # marked started with its chunk: held back after all
                self.held.append(msg)
                return False
            if permits is not None:
                self.breaker.probing(1)
            gate.lanes.started(msg)
            return True

    def finish(self, msg: Message, outcome: Outcome, run_lease: int | None = None) -> bool:
        """The handler returned; True when the caller must settle the message (it still holds the lease).
        `run_lease`: `msg` is the next unsettled message of that run (`admit_run`), counted off it while the run is
        leased as a whole.

        Successes reach the breaker in bulk (before any failure is counted, and once per loop turn): a success is
        an integer increment here."""
        with self.lock:
            if run_lease is not None and self.leases.settle_run(run_lease, 1):
                owned = True
            else:
                owned = self.leases.remove(lease_key(msg))
            if owned:
                if outcome is OK and self.breaker.state is BreakerState.CLOSED:
                    self.processed += 1
                    self._unrecorded_ok += 1
                else:
                    self._record(outcome, now_ms())
            self.wake_if_room()
        return owned

    def wake_if_room(self) -> None:
        """Wake the receiving loop once a refill's worth of room is free (with `lock` held); ordered, once a
        receive could take its least (`OrderGate.receivable`) too: else every settled message would wake it."""
        room = self.capacity - len(self.leases) >= self.refill
        if room and not self.wake.is_set() and (self.gate is None or self.gate.receivable()):
            self.notify()

    def finish_ok(self, messages: list[Message], keys: list[int] | None = None) -> list[Message]:
        """`finish` for handlers that returned, in one go: those the caller must acknowledge. `keys`: their
        `lease_keys`, when the caller has them already."""
        keys = lease_keys(messages) if keys is None else keys
        with self.lock:
            return self.settle_ok(messages, keys)

    def finish_ordered(
        self, messages: list[Message], keys: list[int] | None = None
    ) -> tuple[list[Message], list[Message], int]:
        """Ordered `finish_ok` under the same one lock that lets the next messages of their lanes start: (those the
        caller must acknowledge, those that start now, their mark for `may_start_marked`). While the breaker is
        closed they are let start there (marked running, as `start_ordered` marks a chunk); else UNMARKED."""
        gate = self.gate
        assert gate is not None
        keys = lease_keys(messages) if keys is None else keys
        with self.lock:
            closed = self.breaker.state is BreakerState.CLOSED
            following = gate.advance(messages, now_ms(), running=closed)
            owned = self.settle_ok(messages, keys)
            return owned, following, gate.revocations if closed and following else UNMARKED

    def settle_ok(self, messages: list[Message], keys: list[int]) -> list[Message]:
        """`finish_ok` with `lock` held."""
        owned = list(compress(messages, self.leases.remove_all(keys)))
        self._count_ok(owned)
        return owned

    def _count_ok(self, owned: list[Message]) -> None:
        if self.breaker.state is BreakerState.CLOSED:
            self.processed += len(owned)
            self._unrecorded_ok += len(owned)
        else:
            now = now_ms()
            for _ in owned:
                self._record(OK, now)
        self.wake_if_room()

    def record_outcome(self, outcome: Outcome, now: int) -> None:
        """Count an outcome and feed it to the breaker (with `lock` held)."""
        self._record(outcome, now)

    def _record(self, outcome: Outcome, now: int) -> None:
        if outcome is OK:
            self.processed += 1
        else:
            self.tallies[_TALLY[outcome.kind]] += 1
        self._flush_successes(now)
        transition = self.breaker.record(outcome.downstream_ok, now)
        if transition is not None:
            self._transition(transition)

    def _flush_successes(self, now: int) -> None:
        if self._unrecorded_ok:
            self.breaker.record_successes(self._unrecorded_ok, now)
            self._unrecorded_ok = 0

    def release(self, msg: Message) -> bool:
        """Give up a message that never started (shutdown); True when the caller must nack it."""
        with self.lock:
            return self.leases.remove(lease_key(msg))

    def due(self, now_ms: int) -> Due[Message]:
        """Leases to extend now and messages that ran too long (counted as failed). Call with `lock` held, and
        extend before releasing it, so that no END of a message can precede its extension."""
        self._flush_successes(now_ms)
        self._transition(self.breaker.poll(now_ms))
        due = self.leases.due(now_ms)
        self.tallies["extended"] += len(due.extend)
        self.tallies["expired"] += len(due.expired)
        if due.expired:
            self.changes += 1
        for msg in due.expired:
            _log.warning(
                "%s[%d]@%d ran past the maximum processing time (%d ms): nacked, its result will be ignored",
                msg.topic,
                msg.partition,
                msg.offset,
                self.settings.max_processing_ms,
            )
            self._transition(self.breaker.record(False, now_ms))
        return due

    def budget(self) -> int:
        """Messages the loop may receive now: none while the breaker is open or messages are held."""
        with self.lock:
            permits = self.breaker.permits()
            free = self.capacity - len(self.leases)
            if permits is None:
                if free < self.refill:
                    return 0
                if self.gate is None:
                    return free
                room = self.gate.room
                return min(free, room) if room >= self.gate.min_receive else 0
            return 0 if self.held else min(free, permits)

    def releasable(self) -> list[Message]:
        """Held messages that may be tried again: all once closed, the probes' worth when half open."""
        with self.lock:
            permits = self.breaker.permits()
            count = len(self.held) if permits is None else min(permits, len(self.held))
            return [self.held.popleft() for _ in range(count)]

    def held_out(self) -> list[Message]:
        """Shutdown: the held messages, which never started, given up (the caller nacks them)."""
        with self.lock:
            items = list(self.held)
            self.held.clear()
            for msg in items:
                self.leases.remove(lease_key(msg))
            return items

    def abandon(self) -> list[Message]:
        """Every message still held (shutdown past the grace period): the caller nacks them."""
        with self.lock:
            items = self.leases.items()
            self.leases.clear()
            self.held.clear()
            return items

    def publish(self, now_ms: int) -> None:
        """Counts and gauges to the metrics (once per loop turn, not per message), and the worker's progress: a
        message settled is progress; messages held while the breaker is not open are work waiting."""
        with self.lock:
            tallies, self.tallies = self.tallies, Counter()
            tallies["processed"], self.processed = self.processed, 0
            rate = self.breaker.failure_rate(now_ms)
            outstanding = len(self.leases)
            breaker_open = self.breaker.state is BreakerState.OPEN
        if any(tallies[outcome] for outcome in _SETTLED):
            self.progress.progressed()
        self.progress.waiting(outstanding > 0 and not breaker_open)
        self.metrics.add(dict(tallies))
        self.metrics.failure_rate.labels(self.metrics.topic).set(rate)
        self.metrics.in_flight.labels(self.metrics.topic).set(outstanding)
        if self.gate is not None:
            self.metrics.ordered(*self.gate.gauges())

    def _transition(self, transition: Transition | None) -> None:
        if transition is None:
            return
        self.changes += 1
        self.metrics.transition(transition)
        if transition.after is BreakerState.OPEN:
            _log.warning(
                "circuit breaker open on %s: failure rate %.0f%%; receiving stops for %d ms",
                self.metrics.topic,
                transition.failure_rate * 100,
                transition.backoff_ms,
            )
        else:
            _log.warning(
                "circuit breaker %s on %s (was %s)",
                transition.after.value.replace("_", " "),
                self.metrics.topic,
                transition.before.value.replace("_", " "),
            )
        self.notify()
