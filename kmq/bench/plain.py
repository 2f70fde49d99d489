"""The ceiling: a plain confluent-kafka consumer in a group, consuming in batches with one commit per batch (waited
for; `plain-async`: sent without waiting)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kmq.bench.measure import BatchClock
from kmq.bench.work import burn
from kmq.config import KmqConfig
from kmq.errors import BenchError
from kmq.kafka import consumer_settings

POLL_TIMEOUT_S = 0.5


class PlainContender:
    """The consumer settings of `KmqClient` (read_committed, manual commits) but for the offset store: commit()
    commits what the batch consumed, as in any plain consumer. No markers, no tracker.

    Overhead of a batch: the offset commit (`asynchronous`: its sending only).
    """

    def __init__(self, config: KmqConfig, batch: int, asynchronous: bool = False, work_us: int = 0) -> None:
        self._work_us = work_us  # the CPU the handler burns per message, as every contender's does
        self._topic = config.queue_topic
        self._batch = batch
        self._asynchronous = asynchronous
        self._consumer = Consumer(
            consumer_settings(config, config.group_id, isolation_level="read_committed", enable_auto_offset_store=True)
        )
        self._assigned: list[TopicPartition] = []

    def prepare(self, deadline: float) -> None:
        """Join the group and wait for the assignment (the topic is still empty); then pause fetching, so that
        nothing is fetched while the queue is preloaded: the window measures consuming from the broker."""
        self._consumer.subscribe([self._topic], on_assign=self._on_assign)
        while not self._assigned:
            if time.monotonic() > deadline:
                raise BenchError(f"plain consumer got no partitions of {self._topic} in time")
            self._consumer.consume(self._batch, POLL_TIMEOUT_S)
        self._consumer.pause(self._assigned)

    def run(self, clock: BatchClock, progress: Callable[[int], None], stall_s: float) -> dict[str, Any]:
        self._consumer.resume(self._assigned)
        while not clock.done:
            records = self._consumer.consume(self._batch, POLL_TIMEOUT_S)
            arrived = time.perf_counter()
            received = sum(map(_process, records))
            if not received:
                clock.check_stall(stall_s)
                continue
            for _ in range(received if self._work_us else 0):
                burn(self._work_us)
            began = time.perf_counter()
            if self._asynchronous:
                self._consumer.commit(asynchronous=True)
            else:
                self._consumer.commit(asynchronous=False)
            if clock.batch(received, time.perf_counter() - began, arrived):
                progress(clock.received)
        if self._asynchronous:  # the window ends with every commit done, as the synchronous one's does
            self._commit_rest()
        return clock.figures()

    def _commit_rest(self) -> None:
        """The last commit, synchronously: _NO_OFFSET when the asynchronous ones already committed everything."""
        try:
            self._consumer.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._NO_OFFSET:
                raise

    def close(self) -> None:
        self._consumer.close()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned = partitions


def _process(record: Any) -> bool:
    """The no-op processing every contender does: look at the value. False for a non-fatal consumer event."""
    error = record.error()
    if error is None:
        record.value()
        return True
    if error.fatal():
        raise KafkaException(error)
    return False
