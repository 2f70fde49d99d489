"""Quick handlers run a received batch on the handler thread whose receiving turn it was, the turn held meanwhile
(without Kafka): ordered, in offset order outside the lanes, until a handler raises, gets slow or something changes,
when the rest enters the lanes; unordered, in quick chunks until handlers get slow, when the rest is queued."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import cast

import pytest

from kmq.client import KmqClient
from kmq.message import Message
from kmq.worker import threads as threads_module
from kmq.worker.config import WorkerConfig
from kmq.worker.core import WorkerCore, now_ms
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.ordering import Ordering
from kmq.worker.threads import HandlerThreads, Led, _Run
from tests.helpers import wait_for
from tests.unit.test_worker_threads import CONCURRENCY, CONFIG, WAIT_S, Settled, submit, submit_keyed

IDLE_S = 0.01  # a turn with nothing to receive waits this long, as a receive's poll timeout would
# Handlers count as quick below this (s per message, measured), in the tests whose handlers must not turn slow: a
# busy machine's pause of tens of ms in a chunk then never makes them look slow, as it could at the worker's 20 µs.
LENIENT_QUICK_S = 0.01


@pytest.fixture
def lenient() -> object:
    """QUICK_S raised for the test (see LENIENT_QUICK_S)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threads_module, "QUICK_S", LENIENT_QUICK_S)
        yield


SLOW_S = 0.05  # the work of a handler that turns slow


class Receiver:
    """The handler threads' receiving turn, as `Worker._turn` takes it, over batches the test hands in."""

    def __init__(self, core: WorkerCore) -> None:
        self.core = core
        self.batches: list[list[Message]] = []
        self.lock = threading.Lock()

    def send(self, batch: list[Message]) -> None:
        with self.lock:
            self.batches.append(batch)

    def __call__(self, threads: HandlerThreads) -> Led | None:
        gate = self.core.gate
        if gate is not None:
            threads.submit(gate.retries_due(now_ms()))
            if threads.queued():
                return [], 0, None, None, None
        with self.lock:
            batch = self.batches.pop(0) if self.batches else None
        if batch is None:
            time.sleep(IDLE_S)  # (a receive's poll timeout: nothing arrived)
            return [], 0, None, None, None
        if gate is None:  # leased as a whole
            return batch, len(batch), None, None, self.core.admit_run(batch, now_ms())
        heads, mark, keys, run_lease = self.core.admit_ordered(batch, now_ms(), in_order=True)
        return heads, len(batch), mark, keys, run_lease


class Calls:
    """Each call in order: (offset, thread, whether a batch ran in order then); raises once on `failing`, sleeps
    SLOW_S on `slow`, runs `then` after `at`."""

    def __init__(self, core: WorkerCore) -> None:
        self.core = core
        self.calls: list[tuple[int, str, bool]] = []
        self.failing = self.slow = self.at = self.stuck = -1
        self.then = lambda: None
        self.lock = threading.Lock()
        self.blocked, self.release = threading.Event(), threading.Event()

    def __call__(self, msg: Message) -> None:
        gate = self.core.gate
        with self.lock:
            self.calls.append((msg.offset, threading.current_thread().name, gate is not None and gate.in_order))
        if msg.offset == self.failing and msg.redelivery_count == 0:
            raise RuntimeError(f"downstream hiccup on {msg.offset}")
        if msg.offset == self.slow:
            time.sleep(SLOW_S)  # (the handler's own work, which turned slow)
        if msg.offset == self.stuck:
            self.blocked.set()
            self.release.wait(WAIT_S)
        if msg.offset == self.at:
            self.then()

    def thread_of(self, offset: int) -> str:
        with self.lock:
            return next(thread for o, thread, _ in self.calls if o == offset)

    def offsets(self, since: int = 0) -> list[int]:
        with self.lock:
            return [offset for offset, _, _ in self.calls if offset >= since]


def started(ordering: Ordering) -> tuple[WorkerCore, HandlerThreads, Settled, Calls, Receiver, list[BaseException]]:
    settings = WorkerConfig(concurrency=CONCURRENCY, prefetch=10_000, ordering=ordering)
    core = WorkerCore(CONFIG.with_overrides(nack_backoff_base_ms=1), settings, WorkerMetrics("jobs"))
    client, died, calls, receiver = Settled(), cast(list[BaseException], []), Calls(core), Receiver(core)
    threads = HandlerThreads(
        core, cast(KmqClient, client), calls, CONCURRENCY, lambda thread, e: died.append(e), receiver
    )
    return core, threads, client, calls, receiver, died


def warmed_up(core: WorkerCore, threads: HandlerThreads, client: Settled, keyed: bool) -> int:
    """Batches through the queue until the threads measured the handlers quick and a thread receives; returns the
    next free offset."""
    offset = 0
    while not threads.handlers_lead():
        (submit_keyed if keyed else submit)(core, threads, offset, 500)
        offset += 500
        wait_for(lambda end=offset: sum(client.acked.values()) == end, WAIT_S, what="the warm-up acknowledged")
        assert offset < 50_000, "the handlers were never measured quick"
    wait_for(threads.led_recently, WAIT_S, what="a handler thread receiving")
    return offset


def extending_all(core: WorkerCore, extended: list[int]) -> Callable[[], None]:
    """The lease thread's tick with every lease near its deadline (messages at 30 s): the offsets it extends go to
    `extended`."""

    def extend() -> None:
        with core.lock:
            extended.extend(msg.offset for msg, _ in core.due(now_ms() + 29_500).extend)

    return extend


def keyed(offset: int, keys: int, partitions: int = 1) -> Message:
    """A message of key `offset % keys` on partition `offset % partitions`."""
    key = str(offset % keys).encode()
    return Message(b"v", key, "jobs", offset % partitions, offset, 0, 0, now_ms() + 30_000)


@pytest.mark.usefixtures("lenient")
def test_an_ordered_batch_runs_in_offset_order_on_the_thread_that_received_it_outside_the_lanes() -> None:
    core, threads, client, calls, receiver, died = started(Ordering.KEY)
    gate = core.gate
    assert gate is not None
    try:
        offset = warmed_up(core, threads, client, keyed=True)
        receiver.send([keyed(o, 30) for o in range(offset, offset + 300)])
        wait_for(lambda: sum(client.acked.values()) == offset + 300, WAIT_S, what="the batch acknowledged")
        wait_for(lambda: not gate.in_order, WAIT_S, what="the run over")
    finally:
        threads.stop()
    run = [call for call in calls.calls if call[0] >= offset]
    assert [o for o, _, _ in run] == list(range(offset, offset + 300))  # in offset order, each once
    assert len({thread for _, thread, _ in run}) == 1 and all(in_order for _, _, in_order in run)
    assert threads.batches_in_order == 1 and gate.lanes.idle
    assert died == [] and client.nacked == Counter() and core.outstanding == 0


@pytest.mark.usefixtures("lenient")
def test_a_failure_in_an_ordered_run_hands_the_rest_to_the_lanes_and_its_key_waits_for_its_retry() -> None:
    core, threads, client, calls, receiver, died = started(Ordering.KEY)
    gate = core.gate
    assert gate is not None
    try:
        offset = warmed_up(core, threads, client, keyed=True)
        calls.failing = offset + 45  # key 5 of 20: its later messages wait for the retry in place
        receiver.send([keyed(o, 20) for o in range(offset, offset + 200)])
        wait_for(lambda: sum(client.acked.values()) == offset + 200, WAIT_S, what="the batch acknowledged")
    finally:
        threads.stop()
    ran = calls.offsets(offset)
    assert sorted(ran) == sorted([*range(offset, offset + 200), offset + 45])  # each once, the failed one twice
    key_5 = [o for o in ran if (o - offset) % 20 == 5]
    assert key_5 == [offset + 5, offset + 25, offset + 45, *range(offset + 45, offset + 200, 20)]  # retried first
    assert ran[:45] == list(range(offset, offset + 45))  # in order up to the failure, then by the lanes
    assert not any(in_order for o, _, in_order in calls.calls if o > offset + 45)
    assert client.nacked == Counter() and died == [] and core.outstanding == 0 and gate.lanes.idle


@pytest.mark.usefixtures("lenient")
def test_a_revocation_in_an_ordered_run_drops_the_rest_of_its_partitions_and_the_others_run() -> None:
    core, threads, client, calls, receiver, died = started(Ordering.KEY)
    gate = core.gate
    assert gate is not None
    try:
        offset = warmed_up(core, threads, client, keyed=True)
        calls.at, calls.then = offset + 20, lambda: gate.revoked({0})  # the group takes partition 0 away
        receiver.send([keyed(o, 40, partitions=2) for o in range(offset, offset + 200)])
        wait_for(
            lambda: offset + 199 in calls.offsets(offset) and core.outstanding == 0,
            WAIT_S,
            what="the batch acknowledged or dropped",
        )
    finally:
        threads.stop()
    ran = set(calls.offsets(offset))
    partition_1 = {o for o in range(offset, offset + 200) if o % 2}
    assert ran == set(range(offset, offset + 21)) | partition_1  # nothing of partition 0 after the revocation
    assert set(client.acked) - set(range(offset)) == ran  # the rest of partition 0 dropped unsettled
    assert client.nacked == Counter() and died == []


def test_an_ordered_run_whose_handler_turns_slow_hands_the_rest_to_the_lanes() -> None:
    core, threads, client, calls, receiver, died = started(Ordering.KEY)
    gate = core.gate
    assert gate is not None
    try:
        offset = warmed_up(core, threads, client, keyed=True)
        calls.slow = offset + 3
        receiver.send([keyed(o, 500) for o in range(offset, offset + 500)])
        wait_for(lambda: sum(client.acked.values()) == offset + 500, WAIT_S, what="the batch acknowledged")
    finally:
        threads.stop()
    run = [call for call in calls.calls if call[0] >= offset]
    in_order = [o for o, _, flag in run if flag]
    # the slow one's chunk finished in order; what followed it went through the lanes
    assert in_order == list(range(offset, offset + len(in_order))) and offset + 3 in in_order
    assert len(in_order) < 500 and sorted(o for o, _, _ in run) == list(range(offset, offset + 500))
    assert died == [] and client.nacked == Counter() and core.outstanding == 0 and gate.lanes.idle


@pytest.mark.usefixtures("lenient")
def test_an_unordered_batch_runs_on_the_thread_that_received_it_and_a_shutdown_gives_back_the_rest() -> None:
    core, threads, client, calls, receiver, died = started(Ordering.NONE)
    try:
        offset = warmed_up(core, threads, client, keyed=False)
        receiver.send([keyed(o, 10) for o in range(offset, offset + 400)])
        wait_for(lambda: sum(client.acked.values()) == offset + 400, WAIT_S, what="the batch acknowledged")
        later = offset + 400
        calls.at, calls.then = later + 150, threads.drain  # the worker's shutdown begins in the next one
        receiver.send([keyed(o, 10) for o in range(later, later + 400)])
        wait_for(
            lambda: later + 150 in calls.offsets(later) and core.outstanding == 0,
            WAIT_S,
            what="the batch acknowledged or given back",
        )
    finally:
        threads.stop()
    first = [call for call in calls.calls if offset <= call[0] < later]
    assert [o for o, _, _ in first] == list(range(offset, later)) and len({t for _, t, _ in first}) == 1
    assert calls.offsets(later) == list(range(later, later + 151))
    assert client.nacked == Counter({o: 1 for o in range(later + 151, later + 400)})  # given back, never run
    assert died == []


@pytest.mark.usefixtures("lenient")
def test_an_unordered_run_whose_leases_are_extended_or_whose_handler_raises_runs_on_and_settles_each_once() -> None:
    """A run's leases are held as one; its rest turns into leases by key when the lease thread extends them, or
    when a failure is settled alone. The run goes on, checking and settling by key."""
    core, threads, client, calls, receiver, died = started(Ordering.NONE)
    try:
        offset = warmed_up(core, threads, client, keyed=False)
        extended: list[int] = []
        calls.at, calls.then, calls.failing = offset + 100, extending_all(core, extended), offset + 250
        receiver.send([keyed(o, 10) for o in range(offset, offset + 400)])
        wait_for(lambda: sum(client.acked.values()) == offset + 399, WAIT_S, what="the batch acknowledged")
        wait_for(lambda: core.outstanding == 0, WAIT_S, what="the failure settled")
    finally:
        threads.stop()
    # the unsettled rest was extended (the chunk running then included), and each message ran once
    assert extended[0] <= offset + 100 and extended == list(
        range(extended[0], offset + 400)
    )  # (from its chunk's first)
    assert calls.offsets(offset) == list(range(offset, offset + 400))  # in one run, each once
    assert len({thread for o, thread, _ in calls.calls if o >= offset}) == 1
    assert set(client.acked) == set(range(offset + 400)) - {offset + 250}
    assert client.nacked == Counter({offset + 250: 1}) and died == []


@pytest.mark.usefixtures("lenient")
def test_a_key_ordered_run_extended_mid_run_then_failing_hands_its_keyed_rest_to_the_lanes() -> None:
    core, threads, client, calls, receiver, died = started(Ordering.KEY)
    gate = core.gate
    assert gate is not None
    try:
        offset = warmed_up(core, threads, client, keyed=True)
        extended: list[int] = []
        calls.at, calls.then, calls.failing = offset + 30, extending_all(core, extended), offset + 85  # key 5 of 20
        receiver.send([keyed(o, 20) for o in range(offset, offset + 200)])
        wait_for(lambda: sum(client.acked.values()) == offset + 200, WAIT_S, what="the batch acknowledged")
        wait_for(lambda: core.outstanding == 0 and gate.lanes.idle, WAIT_S, what="all settled")
    finally:
        threads.stop()
    assert extended and extended[0] <= offset + 30 and extended == list(range(extended[0], offset + 200))
    ran = calls.offsets(offset)
    assert sorted(ran) == sorted([*range(offset, offset + 200), offset + 85])
    assert [o for o in ran if (o - offset) % 20 == 5] == [
        offset + 5,
        offset + 25,
        offset + 45,
        offset + 65,
        offset + 85,
        *range(offset + 85, offset + 200, 20),
    ]
    assert client.acked == Counter(range(offset + 200)) and client.nacked == Counter() and died == []
    assert not gate.in_order


@pytest.mark.usefixtures("lenient")
def test_an_unordered_run_whose_handler_raises_with_no_extension_settles_each_once() -> None:
    core, threads, client, calls, receiver, died = started(Ordering.NONE)
    try:
        offset = warmed_up(core, threads, client, keyed=False)
        calls.failing = offset + 150
        receiver.send([keyed(o, 10) for o in range(offset, offset + 400)])
        wait_for(lambda: sum(client.acked.values()) == offset + 399, WAIT_S, what="the batch acknowledged")
        wait_for(lambda: core.outstanding == 0, WAIT_S, what="the failure settled")
    finally:
        threads.stop()
    assert calls.offsets(offset) == list(range(offset, offset + 400))
    assert client.acked == Counter(set(range(offset + 400)) - {offset + 150})
    assert client.nacked == Counter({offset + 150: 1}) and died == []


def test_an_unordered_run_whose_handler_turns_slow_queues_the_rest_for_the_other_threads() -> None:
    core, threads, client, calls, receiver, died = started(Ordering.NONE)
    try:
        offset = warmed_up(core, threads, client, keyed=False)
        calls.slow = offset
        receiver.send([keyed(o, 10) for o in range(offset, offset + 600)])
        wait_for(lambda: sum(client.acked.values()) == offset + 600, WAIT_S, what="the batch acknowledged")
    finally:
        threads.stop()
    assert sorted(calls.offsets(offset)) == list(range(offset, offset + 600))
    assert died == [] and client.nacked == Counter() and core.outstanding == 0


def test_an_ordered_run_stuck_in_a_handler_is_taken_over_and_only_that_key_waits() -> None:
    core, threads, client, calls, receiver, died = started(Ordering.KEY)
    gate = core.gate
    assert gate is not None
    try:
        offset = warmed_up(core, threads, client, keyed=True)
        calls.stuck = offset + 7  # key 7 of 50: its later messages must wait for it
        receiver.send([keyed(o, 50) for o in range(offset, offset + 400)])
        assert calls.blocked.wait(WAIT_S)
        others = {o for o in range(offset + 8, offset + 400) if (o - offset) % 50 != 7}
        # (the receiving loop and the lease thread nudge the threads; this test has neither: it does)
        wait_for(lambda: threads.nudge() or others <= set(calls.offsets(offset)), WAIT_S, what="the rest run meanwhile")
        assert not any((o - offset) % 50 == 7 for o in calls.offsets(offset + 8))  # its key waits
        calls.release.set()
        wait_for(lambda: sum(client.acked.values()) == offset + 400, WAIT_S, what="the batch acknowledged")
    finally:
        calls.release.set()
        threads.stop()
    ran = calls.offsets(offset)
    assert sorted(ran) == list(range(offset, offset + 400))
    assert [o for o in ran if (o - offset) % 50 == 7] == list(range(offset + 7, offset + 400, 50))
    assert calls.thread_of(offset + 399) != calls.thread_of(offset + 7)
    assert died == [] and client.nacked == Counter() and core.outstanding == 0 and gate.lanes.idle
    assert not gate.in_order


def test_an_unordered_run_stuck_in_a_handler_is_taken_over_and_the_rest_runs_meanwhile() -> None:
    core, threads, client, calls, receiver, died = started(Ordering.NONE)
    try:
        offset = warmed_up(core, threads, client, keyed=False)
        calls.stuck = offset + 3
        receiver.send([keyed(o, 10) for o in range(offset, offset + 400)])
        assert calls.blocked.wait(WAIT_S)
        rest = set(range(offset + 4, offset + 400))
        wait_for(lambda: threads.nudge() or rest <= set(calls.offsets(offset)), WAIT_S, what="the rest run meanwhile")
        assert sum(client.acked.values()) < offset + 400  # (the stuck one's chunk-mates before it wait with it)
        calls.release.set()
        wait_for(lambda: sum(client.acked.values()) == offset + 400, WAIT_S, what="the batch acknowledged")
    finally:
        calls.release.set()
        threads.stop()
    assert sorted(calls.offsets(offset)) == list(range(offset, offset + 400))
    assert died == [] and client.nacked == Counter() and core.outstanding == 0


def test_the_receiving_loop_does_not_receive_beside_a_run_until_its_chunk_stalls_then_takes_it_over() -> None:
    core, threads, client, calls, _, died = started(Ordering.NONE)
    try:
        batch = [keyed(o, 10) for o in range(20)]
        run = threads._current = _Run(batch, 0, core.admit_run(batch, now_ms()))  # its thread is in its first chunk
        assert not threads.take_over_stalled() and not run.taken and threads._current is run
        run.chunk_at -= 2 * threads_module.LEAD_GAP_S  # its chunk has taken past LEAD_GAP_S
        assert threads.take_over_stalled() and run.taken and threads._current is None
        wait_for(lambda: sum(client.acked.values()) == 20, WAIT_S, what="the rest run by the other threads")
    finally:
        threads.stop()
    assert sorted(calls.offsets()) == list(range(20)) and died == [] and core.outstanding == 0
