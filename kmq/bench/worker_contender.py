"""The worker contenders: `kmq.Worker` with a no-op handler on 8 threads, a tracker running — what the runtime
(dispatch to threads, lease bookkeeping, breaker, settling) costs over the bare client's loop; `worker-key` the same
with key ordering (its queue's messages have 1 000 keys)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from kmq.bench.measure import BatchClock
from kmq.bench.work import burn
from kmq.config import KmqConfig
from kmq.errors import BenchError
from kmq.message import Message
from kmq.worker import Ordering, Worker, WorkerConfig

CONCURRENCY = 8
SAMPLE_S = 0.02


class WorkerContender:
    """The window opens when the first message reaches the handler and ends once the last one is handled and every
    END is durable (`flush()`), as for the kmq contender. Prefetch is 2 x batch: it receives once `batch` messages
    have room, so its receives are as large as kmq's."""

    def __init__(self, config: KmqConfig, batch: int, ordering: Ordering = Ordering.NONE, work_us: int = 0) -> None:
        self._counter = itertools.count(1)
        self._handled = 0
        self._target = 0
        self._reached = threading.Event()  # the last message was handled: the window closes now, not at a sample
        self._first = 0.0
        self._work_us = work_us
        settings = WorkerConfig(concurrency=CONCURRENCY, prefetch=2 * batch, ordering=ordering)
        self._worker = Worker(self._handle, config, settings=settings)
        self._thread: Any = None

    def _handle(self, msg: Message) -> None:
        _ = msg.value  # the same no-op processing as the other contenders
        if self._work_us:
            burn(self._work_us)
        if not self._first:
            self._first = time.perf_counter()
        self._handled = handled = next(self._counter)  # itertools.count is atomic under the GIL
        if handled == self._target:
            self._reached.set()

    def prepare(self, deadline: float) -> None:
        """Nothing before GO: the worker joins its group then; the window opens at the first message handled."""

    def run(self, clock: BatchClock, progress: Callable[[int], None], stall_s: float) -> dict[str, Any]:
        self._target = clock.target
        self._thread = self._worker.run_in_thread()
        last_change = time.perf_counter()
        while not self._reached.wait(SAMPLE_S):  # sampling the handler's count for progress reports meanwhile
            if self._worker.failure is not None:
                failure = self._worker.failure
                raise BenchError(f"the worker stopped after {self._handled} messages: {failure}") from failure
            if self._handled != clock.received:
                clock.received, last_change = self._handled, time.perf_counter()
                progress(clock.received)
            elif time.perf_counter() - last_change > stall_s:
                raise BenchError(f"no message for {stall_s:.0f}s after {clock.received} of {clock.target}")
        clock.opened, clock.received = self._first, self._handled
        client = self._worker.client
        if client is not None:
            client.flush()
        return clock.figures(failed_markers=client.failed_markers if client is not None else 0)

    def close(self) -> None:
        self._worker.stop()
        if self._thread is not None:
            self._thread.join(60)
