"""How an ordered worker hands on and receives, without Kafka: a key's next messages run on the thread that ran the
one before (no queue hand-off each), the receiving loop waits for room for a receive's least instead of taking a
few messages at a time (each receive costs a START batch, a commit and a fetch's worth of the consumer's time), and
the key waits reach their histogram in bulk."""

from __future__ import annotations

import queue
import threading
from typing import ClassVar, cast

import pytest
from prometheus_client import CollectorRegistry, Histogram

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.message import Message
from kmq.worker.config import WorkerConfig
from kmq.worker.core import WorkerCore, now_ms
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.ordered import PAUSE_AFTER_MS
from kmq.worker.threads import HandlerThreads

CONFIG = KmqConfig(bootstrap_servers="unused:9092", queue_topic="jobs", msg_timeout_ms=30_000)
WAIT_S = 10.0
BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300)  # the worker's, for the key wait
NOW = 1_000_000


class CountedQueue(queue.SimpleQueue[tuple[list[Message], int | None] | None]):
    """The handler threads' queue, counting the messages of each chunk put in it."""

    puts: ClassVar[list[int]] = []  # set per test (monkeypatch)

    def put(
        self, item: tuple[list[Message], int | None] | None, block: bool = True, timeout: float | None = None
    ) -> None:
        if item:
            self.puts.append(len(item[0]))
        super().put(item, block, timeout)


class Acks:
    """What `HandlerThreads` calls on its client here: `processed` (no Kafka), as with `kmq` markers."""

    ends_batched = False

    def processed(self, msg: Message) -> None:
        """Nothing to write."""


def keyed(partition: int, offset: int, key: bytes, deadline_ms: int = NOW + 30_000) -> Message:
    return Message(b"v", key, "jobs", partition, offset, 0, 0, deadline_ms)


def ordered_core(**settings: int) -> WorkerCore:
    return WorkerCore(CONFIG, WorkerConfig(ordering="key", **settings), WorkerMetrics("jobs"))  # type: ignore[arg-type]


def test_a_keys_run_goes_through_the_queue_once_and_stays_in_offset_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a key-ordered worker's thread and 20 messages of one key
    core = ordered_core(concurrency=1)
    handled: list[int] = []
    all_handled = threading.Event()
    died: list[BaseException] = []

    def handle(msg: Message) -> None:
        handled.append(msg.offset)
        if len(handled) == 20:
            all_handled.set()

    puts: ClassVar[list[int]] = []  # set per test (monkeypatch)
    monkeypatch.setattr(CountedQueue, "puts", puts)
    monkeypatch.setattr(queue, "SimpleQueue", CountedQueue)
    threads = HandlerThreads(core, cast(KmqClient, Acks()), handle, 1, lambda thread, e: died.append(e))
    batch = [keyed(0, offset, b"a", now_ms() + 30_000) for offset in range(20)]
    # when they are received
    threads.submit(core.admit(batch, now_ms()), len(batch))
    assert all_handled.wait(WAIT_S)
    threads.stop()
    # then they ran in offset order, and only the key's first went through the queue (the rest followed it on the
    # same thread)
    assert handled == list(range(20))
    assert puts == [1]
    assert died == []


def test_the_loop_waits_for_room_for_a_receives_least_rather_than_take_a_few() -> None:
    # given a limit of 8 per partition (a receive takes at least 4) and partition 0 holding 5 of one key
    core = ordered_core(concurrency=2, prefetch=30, partition_limit=8)
    gate = core.gate
    assert gate is not None and gate.min_receive == 4
    held = [keyed(0, offset, b"a") for offset in range(5)]
    core.admit(held, NOW)
    # then the loop receives nothing (room for 3 only), and the partition counts as full: it pauses if it stays so
    assert gate.flow(NOW) == (set(), set())
    assert core.budget() == 0
    assert gate.flow(NOW + PAUSE_AFTER_MS) == ({0}, set())
    assert core.budget() == 8  # partition 0 paused: a receive may take the limit of another
    # and once it is down to half it resumes and the loop receives again, at most its room
    core.finish_ordered([held[0]])
    assert gate.flow(NOW + PAUSE_AFTER_MS + 1) == (set(), {0})
    assert core.budget() == 4


def test_a_settled_message_wakes_the_loop_only_when_a_receive_could_take_its_least() -> None:
    # given a limit of 8 per partition, partition 0 holding 6 of one key and partition 1 holding one message
    core = ordered_core(concurrency=2, prefetch=30, partition_limit=8)
    gate = core.gate
    assert gate is not None
    zero = [keyed(0, offset, b"a") for offset in range(6)]
    one = keyed(1, 0, b"b")
    core.admit([*zero, one], NOW)
    gate.flow(NOW)
    # when partition 1's message is settled (room in the worker, none for a receive: partition 0 has room for 2)
    core.wake.clear()
    core.finish_ordered([one])
    # then the loop is not woken for it
    assert not core.wake.is_set()
    # nor when partition 0's first is (room for 3)
    _, following, _ = core.finish_ordered([zero[0]])
    assert not core.wake.is_set()
    # but when its second is (room for 4), it is
    core.finish_ordered(following)
    assert core.wake.is_set()


def test_the_key_wait_histogram_fed_in_bulk_reads_as_prometheus_clients_own() -> None:
    # given waits observed in bulk by the worker's metrics and one by one by prometheus_client's Histogram
    waits_ms = [0, 1, 2, 10, 11, 499, 500, 1_000, 1_001, 60_000, 400_000]
    metrics = WorkerMetrics("jobs")
    metrics.ordered(waits_ms, 0, {}, 0)
    registry = CollectorRegistry()
    reference = Histogram("kmq_worker_key_wait_seconds", "", ("topic",), registry=registry, buckets=BUCKETS).labels(
        "jobs"
    )
    for wait_ms in waits_ms:
        reference.observe(wait_ms / 1000)

    # then every bucket, the count and the sum read the same
    def samples(of: CollectorRegistry) -> dict[tuple[str, str], float]:
        return {
            (sample.name, sample.labels.get("le", "")): sample.value
            for family in of.collect()
            if family.name == "kmq_worker_key_wait_seconds"
            for sample in family.samples
            if not sample.name.endswith("_created")
        }

    assert samples(metrics.registry) == samples(registry)
