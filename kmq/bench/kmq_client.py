"""The contender under test: `KmqClient.receive` and `processed` for every message, with a tracker running."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kmq.bench.measure import BatchClock
from kmq.bench.work import burn
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.errors import BenchError

POLL_TIMEOUT_S = 0.5


class TimedConsumer:
    """Wraps the client's consumer to note when `consume()` returned: the rest of `receive()` is kmq's overhead."""

    def __init__(self, consumer: Any) -> None:
        self._consumer = consumer
        self.returned_at = 0.0

    def consume(self, *args: Any, **kwargs: Any) -> Any:
        records = self._consumer.consume(*args, **kwargs)
        self.returned_at = time.perf_counter()
        return records

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


class KmqContender:
    """Overhead of a batch: from the records coming out of `consume()` inside `receive()` to `receive()` returning —
    START markers produced and acknowledged, offsets committed, Message objects built (steps 2-4 of the client flow).

    The window ends with `flush()`: every END marker is durable, as every commit of the plain consumer is.
    """

    def __init__(self, config: KmqConfig, batch: int, work_us: int = 0) -> None:
        self._batch, self._work_us = batch, work_us
        self._client = KmqClient(config)
        # The bench reaches into the client, which has no timing hook of its own (nor should it need one).
        self._timer = TimedConsumer(self._client._consumer)
        self._client._consumer = self._timer  # type: ignore[assignment]  # a proxy with the same methods

    def prepare(self, deadline: float) -> None:
        """Join the group: receive (nothing, the queue is empty) until partitions are assigned. Then pause
        fetching, as the plain contender does, until the window opens."""
        while not self._timer.assignment():
            if time.monotonic() > deadline:
                raise BenchError(f"kmq client got no partitions of {self._client.config.queue_topic} in time")
            self._client.receive(self._batch, POLL_TIMEOUT_S)
        self._timer.pause(self._timer.assignment())

    def run(self, clock: BatchClock, progress: Callable[[int], None], stall_s: float) -> dict[str, Any]:
        self._timer.resume(self._timer.assignment())
        client, work_us = self._client, self._work_us
        while not clock.done:
            messages = client.receive(self._batch, POLL_TIMEOUT_S)
            returned = time.perf_counter()
            if not messages:
                clock.check_stall(stall_s)
                continue
            for message in messages:
                _ = message.value  # the same no-op processing as the other contenders
                if work_us:
                    burn(work_us)
                client.processed(message)
            if clock.batch(len(messages), returned - self._timer.returned_at, self._timer.returned_at):
                progress(clock.received)
        client.flush()
        return clock.figures(failed_markers=client.failed_markers)

    def close(self) -> None:
        self._client.close()
