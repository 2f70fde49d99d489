"""The worker contenders: `kmq.Worker` with a no-op handler on 8 threads, a tracker running — what the runtime
(dispatch to threads, lease bookkeeping, breaker, settling) costs over the bare client's loop; `worker-key` the same
with key ordering (its queue's messages have 1 000 keys)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from kmq.bench.measure import PROGRESS_INTERVAL_S, BatchClock
from kmq.bench.work import burn
from kmq.config import KmqConfig
from kmq.errors import BenchError
from kmq.message import Message
from kmq.worker import Ordering, Worker, WorkerConfig

CONCURRENCY = 8


JOIN_POLL_S = 0.05  # how often `prepare` looks whether the worker's consumer has its partitions


class WorkerContender:
    """The window opens when the first message reaches the handler and ends once the last one is handled and every
    END is durable (`flush()`), as for the kmq contender. Prefetch is 2 x batch: it receives once `batch` messages
    have room, so its receives are as large as kmq's.

    Like for like with the kmq contender, the worker starts before GO: it makes its client and joins its group, and
    its partitions are paused until GO."""

    def __init__(
        self, config: KmqConfig, batch: int, ordering: Ordering = Ordering.NONE, work_us: int = 0, messages: int = 0
    ) -> None:
        self._counter = itertools.count(1)
        self._target = messages  # (0: until `run` is given its clock's)
        self._reached = threading.Event()  # the last message was handled: the window closes now, not at a sample
        self._first = 0.0
        settings = WorkerConfig(concurrency=CONCURRENCY, prefetch=2 * batch, ordering=ordering)
        self._worker = Worker(self._handler(work_us), config, settings=settings)
        self._thread: Any = None
        self._paused: set[int] = set()

    def _handler(self, work_us: int) -> Callable[[Message], None]:
        """The same no-op processing as the other contenders (`work_us` of CPU burnt, if any), plus a count: a
        closure over locals, which costs a no-op handler less than reading its state from `self`."""
        count, reached, clock = self._counter.__next__, self._reached, time.perf_counter

        def handle(msg: Message) -> None:
            _ = msg.value
            if work_us:
                burn(work_us)
            handled = count()  # itertools.count is atomic under the GIL
            if handled == 1:
                self._first = clock()
            if handled == self._target:
                reached.set()

        return handle

    @property
    def _handled(self) -> int:
        """Messages handled so far, as the worker's metrics had them at its last tick (for progress reports)."""
        return int(self._worker.metrics.value("kmq_worker_processed_total"))

    def prepare(self, deadline: float) -> None:
        """Start the worker, and pause its partitions once its consumer has them (the queue is still empty)."""
        self._thread = self._worker.run_in_thread()
        while not self._paused:
            if self._worker.failure is not None:
                raise BenchError(f"the worker stopped before GO: {self._worker.failure}")
            if time.monotonic() > deadline:
                raise BenchError("the worker got no partitions of its queue in time")
            client = self._worker.client
            if client is not None and self._worker.ready.is_set():
                self._paused = self._pause(client)
            if not self._paused:
                time.sleep(JOIN_POLL_S)  # (the group's assignment comes with one of the worker's receives)

    @staticmethod
    def _pause(client: Any) -> set[int]:
        """Pause the partitions the client's consumer has, if any (the bench reaches into the client, which has
        no public view of its assignment); those paused."""
        with client._turns.call():
            topic = client.config.queue_topic
            assigned = {tp.partition for tp in client._consumer.assignment() if tp.topic == topic}
        if assigned:
            client.pause(assigned)
        return assigned

    def run(self, clock: BatchClock, progress: Callable[[int], None], stall_s: float) -> dict[str, Any]:
        self._target = clock.target
        client = self._worker.client
        if client is not None:
            client.resume(self._paused)
        last_change = time.perf_counter()
        # Sampling the handler's count for progress reports meanwhile, as often as the other contenders report theirs
        while not self._reached.wait(PROGRESS_INTERVAL_S):
            if self._worker.failure is not None:
                failure = self._worker.failure
                raise BenchError(f"the worker stopped after {self._handled} messages: {failure}") from failure
            if self._handled != clock.received:
                clock.received, last_change = self._handled, time.perf_counter()
                progress(clock.received)
            elif time.perf_counter() - last_change > stall_s:
                raise BenchError(f"no message for {stall_s:.0f}s after {clock.received} of {clock.target}")
        clock.opened, clock.received = self._first, self._target
        client = self._worker.client
        if client is not None:
            client.flush()
        return clock.figures(failed_markers=client.failed_markers if client is not None else 0)

    def close(self) -> None:
        self._worker.stop()
        if self._thread is not None:
            self._thread.join(60)
