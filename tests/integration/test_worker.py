"""`kmq.Worker` on a real broker with a tracker running: retries, rejects and long handlers lose nothing; the circuit
breaker holds back a failing downstream and recovers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from kmq import headers as h
from kmq.config import KmqConfig
from kmq.message import Message
from kmq.producer import KmqProducer
from kmq.worker import Reject, Retry, Worker, WorkerConfig
from tests.helpers import read_topic, wait_for
from tests.integration.test_tracker_e2e import metric, running_tracker

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]
LONG = frozenset({11, 222, 1333, 2444, 3555})  # these sleep past their lease
SLEEP_S = 8.0


def send_numbers(config: KmqConfig, count: int) -> None:
    with KmqProducer(config) as producer:
        for i in range(count):
            producer.send(str(i).encode(), key=str(i).encode())
        producer.flush()


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    thread = worker.run_in_thread()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(60)
        assert not thread.is_alive(), "the worker did not stop"


class Mixed:
    """Fails 5% of first deliveries with an exception and 5% with Retry, rejects every 250th, sleeps on LONG."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: Counter[int] = Counter()
        self.starts: Counter[int] = Counter()
        self.running: Counter[int] = Counter()
        self.overlaps: list[int] = []

    def begin(self, msg: Message) -> tuple[int, float]:
        number = int(msg.value or b"-1")
        with self.lock:
            self.starts[number] += 1
            self.running[number] += 1
            if self.running[number] > 1:
                self.overlaps.append(number)
        if number % 250 == 0:
            self.end(number, done=False)
            raise Reject(f"poison {number}")
        if msg.redelivery_count == 0 and number % 20 == 3:
            self.end(number, done=False)
            raise RuntimeError(f"downstream hiccup on {number}")
        if msg.redelivery_count == 0 and number % 20 == 7:
            self.end(number, done=False)
            raise Retry(delay_ms=100)
        return number, SLEEP_S if number in LONG else 0.0

    def end(self, number: int, done: bool = True) -> None:
        with self.lock:
            self.running[number] -= 1
            if done:
                self.done[number] += 1

    def __call__(self, msg: Message) -> None:
        number, sleep_s = self.begin(msg)
        time.sleep(sleep_s)
        self.end(number)


class AsyncMixed(Mixed):
    async def __call__(self, msg: Message) -> None:  # type: ignore[override]  # the async flavour of the handler
        number, sleep_s = self.begin(msg)
        await asyncio.sleep(sleep_s)
        self.end(number)


@pytest.mark.parametrize(("kind", "count"), [("threads", 5000), ("asyncio", 1500)])
def test_retries_rejects_and_long_handlers_lose_nothing(make_config: MakeConfig, kind: str, count: int) -> None:
    # given messages whose handler fails 10% of first deliveries, rejects poison ones, and runs past the lease
    config = make_config(partitions=4, msg_timeout_ms=6000, nack_backoff_base_ms=100, max_redeliveries=5)
    handler = Mixed() if kind == "threads" else AsyncMixed()
    send_numbers(config, count)
    worker = Worker(handler, config, settings=WorkerConfig(concurrency=8, breaker_threshold=0.9))
    poison = {n for n in range(count) if n % 250 == 0}
    expected = set(range(count)) - poison
    with running_tracker(config) as tracker, running(worker):
        # when it works until every message is done
        wait_for(lambda: set(handler.done) == expected, 90, interval_s=0.2, what="every message processed")
        wait_for(lambda: worker.core.outstanding == 0, 30, what="every message settled")
        redeliveries = metric(tracker, "kmq_redeliveries_total")
    # then nothing was lost, and the long ones were extended rather than delivered again while they ran
    assert handler.overlaps == []
    long_ones = LONG & expected
    assert long_ones and all(handler.starts[n] == 1 for n in long_ones), {n: handler.starts[n] for n in long_ones}
    assert worker.metrics.value("kmq_worker_lease_extensions_total") >= len(long_ones)
    retried = {n for n in expected if n % 20 in (3, 7)}
    not_twice = {n: handler.starts[n] for n in retried if handler.starts[n] != 2}
    assert not not_twice, not_twice
    # nothing but the retries came back (the tracker copied each once), nothing was processed twice
    assert redeliveries == len(retried)
    assert set(handler.done.values()) == {1}
    assert worker.metrics.value("kmq_worker_processed_total") == len(expected)
    assert worker.metrics.value("kmq_worker_rejected_total") == len(poison)
    assert worker.metrics.value("kmq_worker_breaker_opened_total") == 0
    # and the poison ones are dead letters with their reasons
    dead = read_topic(config, config.dead_letter_topic, 4)
    reasons = {int(r.value or b""): h.get(r.headers, h.DLQ_REASON) for r in dead}
    assert reasons == {n: f"rejected: poison {n}".encode() for n in poison}
    print(f"{kind}: {count} messages, {len(retried)} retried, {len(poison)} rejected, {len(long_ones)} extended")


class Outage:
    """A downstream that fails every call until `until` (monotonic), then works."""

    def __init__(self, outage_s: float) -> None:
        self.until = time.monotonic() + outage_s
        self.lock = threading.Lock()
        self.failures = 0
        self.failed_redeliveries = 0
        self.done: set[bytes] = set()

    def __call__(self, msg: Message) -> None:
        if time.monotonic() < self.until:
            with self.lock:
                self.failures += 1
                self.failed_redeliveries += msg.redelivery_count > 0
            raise ConnectionError("downstream unavailable")
        with self.lock:
            self.done.add(msg.value or b"")


def test_the_breaker_opens_during_an_outage_and_closes_after_it(make_config: MakeConfig) -> None:
    # given 1 000 messages and a downstream that fails everything for 5 s
    config = make_config(partitions=4, msg_timeout_ms=5000, nack_backoff_base_ms=200, max_redeliveries=50)
    send_numbers(config, 1000)
    settings = WorkerConfig(
        concurrency=8,
        breaker_window_ms=2000,
        breaker_min_calls=10,
        breaker_threshold=0.5,
        breaker_backoff_ms=500,
        breaker_backoff_max_ms=2000,
        breaker_probes=2,
    )
    states: list[float] = []
    with running_tracker(config) as tracker:
        outage = Outage(5.0)
        worker = Worker(outage, config, settings=settings)
        with running(worker):
            # when the worker runs through the outage
            def opened() -> bool:
                states.append(worker.metrics.value("kmq_worker_breaker_state"))
                return worker.metrics.value("kmq_worker_breaker_opened_total") >= 1

            wait_for(opened, 10, what="the breaker to open")
            wait_for(lambda: len(outage.done) == 1000, 60, interval_s=0.2, what="every message after the outage")
            redeliveries = metric(tracker, "kmq_redeliveries_total")
        # then it opened (the state gauge showed it), probed, and closed again
        assert 2.0 in states
        assert worker.metrics.value("kmq_worker_breaker_closed_total") >= 1
        assert worker.metrics.value("kmq_worker_breaker_state") == 0
    # and the failures, so the redeliveries they cause, stayed a small fraction of the 1 000 messages
    print(
        f"outage of 5 s: {outage.failures} failed handler calls ({outage.failed_redeliveries} on redeliveries), "
        f"{redeliveries:.0f} redeliveries by the tracker, breaker opened "
        f"{worker.metrics.value('kmq_worker_breaker_opened_total'):.0f} times"
    )
    assert outage.failures <= 60
    assert redeliveries <= outage.failures


def test_a_handler_past_the_maximum_processing_time_is_retried(make_config: MakeConfig) -> None:
    config = make_config(partitions=1, msg_timeout_ms=600, nack_backoff_base_ms=50)
    send_numbers(config, 1)
    calls: list[int] = []
    release = threading.Event()

    def handler(msg: Message) -> None:
        calls.append(msg.redelivery_count)
        if msg.redelivery_count == 0:
            release.wait(10)  # stuck past max_processing_ms

    settings = WorkerConfig(concurrency=2, max_processing_ms=1500)
    worker = Worker(handler, config, settings=settings)
    with running_tracker(config), running(worker):
        wait_for(lambda: calls == [0, 1], 20, what="the stuck message to be retried")
        release.set()
        wait_for(lambda: worker.core.outstanding == 0, 10, what="the retry settled")
    assert worker.metrics.value("kmq_worker_expired_total") == 1
    assert worker.metrics.value("kmq_worker_processed_total") == 1


def test_quick_handlers_receive_on_their_own_thread_and_one_stuck_there_stops_no_receiving(
    make_config: MakeConfig,
) -> None:
    """Quick handlers: a handler thread receives each batch and runs it itself. One of them stuck in a handler: the
    receiving loop takes over, and the other threads run what comes next."""
    config = make_config(partitions=2)
    handled: list[bytes | None] = []  # (appended by every handler thread: a list's append is atomic)
    stuck, release = threading.Event(), threading.Event()

    def handler(msg: Message) -> None:
        if msg.value == b"stuck":
            stuck.set()
            release.wait(60)
        handled.append(msg.value)

    worker = Worker(handler, config, settings=WorkerConfig(concurrency=4))
    with running(worker):
        send_numbers(config, 5000)
        wait_for(lambda: len(handled) == 5000, 30, what="the first 5000 handled")
        assert worker.threads is not None and worker.threads.batches_led > 0
        with KmqProducer(config) as producer:
            producer.send(b"stuck")
            producer.flush()
        assert stuck.wait(30), "the stuck message never reached its handler"
        with KmqProducer(config) as producer:
            for i in range(1000):
                producer.send(f"after-{i}".encode())
            producer.flush()
        wait_for(
            lambda: sum(1 for value in handled if value and value.startswith(b"after-")) == 1000,
            30,
            what="the messages sent after the stuck one handled meanwhile",
        )
        assert b"stuck" not in handled
        release.set()
        wait_for(lambda: b"stuck" in handled, 30, what="the stuck message handled once released")
    assert len(handled) == len(set(handled)) == 6001  # each once
