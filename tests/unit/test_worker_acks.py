"""The acknowledgements handler threads leave for `write_acks`: each written once, even when two threads drain the
backlog at once (issue 29: the loop and the lease thread both drained it, and `pop from an empty deque` killed the
loop thread)."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter, deque
from typing import cast

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.message import Message
from kmq.worker.config import WorkerConfig
from kmq.worker.core import WorkerCore, now_ms
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.threads import HandlerThreads

CONFIG = KmqConfig(bootstrap_servers="unused:9092", queue_topic="jobs", msg_timeout_ms=30_000)
WAIT_S = 5.0


class CountingClient:
    """Counts `processed` per offset (no Kafka); `kmq` markers, whose ENDs the lease thread writes."""

    ends_batched = False

    def __init__(self) -> None:
        self.ends: Counter[int] = Counter()
        self._lock = threading.Lock()

    def processed(self, msg: Message) -> None:
        with self._lock:
            self.ends[msg.offset] += 1


class LookedAtByBoth(deque[Message]):
    """A backlog that lets a writer go on from looking at it only once the other writer has looked too: the two
    writers then both see the last acknowledgement before either takes it — the race's interleaving, every time."""

    def __init__(self, both: threading.Barrier) -> None:
        super().__init__()
        self._both = both

    def __bool__(self) -> bool:
        nonempty = len(self) > 0
        if nonempty and not self._both.broken:
            # a broken barrier: the other writer did not look, there is no interleaving to force
            with contextlib.suppress(threading.BrokenBarrierError):
                self._both.wait(WAIT_S)
        return nonempty


def test_two_writers_taking_the_last_acknowledgement_at_once_write_it_once() -> None:
    client = CountingClient()
    core = WorkerCore(CONFIG, WorkerConfig(concurrency=1), WorkerMetrics("jobs"))
    died: list[BaseException] = []
    client_ = cast(KmqClient, client)  # processed() is all HandlerThreads calls here
    threads = HandlerThreads(core, client_, lambda msg: None, 1, lambda thread, e: died.append(e))
    threads.acked = LookedAtByBoth(threading.Barrier(2))
    threads.acked.append(Message(b"v", None, "jobs", 0, 7, 0, 0, now_ms() + 30_000))
    errors: list[BaseException] = []

    def write() -> None:
        try:
            threads.write_acks()
        except BaseException as e:  # noqa: BLE001  # handed to the test's thread
            errors.append(e)

    writers = [threading.Thread(target=write) for _ in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(2 * WAIT_S)
    threads.stop()
    assert not any(writer.is_alive() for writer in writers)
    assert errors == [] and died == []
    assert client.ends == Counter({7: 1})
