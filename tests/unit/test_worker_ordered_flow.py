"""How an ordered worker hands on, without Kafka: a key's next messages run on the thread that ran the one before (no
queue hand-off each)."""

from __future__ import annotations

import queue
import threading
from typing import ClassVar, cast

import pytest

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.message import Message
from kmq.worker.config import WorkerConfig
from kmq.worker.core import WorkerCore, now_ms
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.threads import HandlerThreads

CONFIG = KmqConfig(bootstrap_servers="unused:9092", queue_topic="jobs", msg_timeout_ms=30_000)
WAIT_S = 10.0
NOW = 1_000_000


class CountedQueue(queue.SimpleQueue[list[Message] | None]):
    """The handler threads' queue, counting the chunks put in it."""

    puts: ClassVar[list[int]] = []  # set per test (monkeypatch)

    def put(self, item: list[Message] | None, block: bool = True, timeout: float | None = None) -> None:
        if item:
            self.puts.append(len(item))
        super().put(item, block, timeout)


class Acks:
    """What `HandlerThreads` calls on its client here: `processed` (no Kafka)."""

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
