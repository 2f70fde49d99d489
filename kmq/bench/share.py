"""Kafka share groups (KIP-932): confluent-kafka's `ShareConsumer`, acknowledging every record explicitly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException, Producer, ShareConsumer

from kmq.bench.measure import BatchClock
from kmq.bench.protocol import SHARE_UNAVAILABLE
from kmq.bench.work import burn
from kmq.config import KmqConfig
from kmq.errors import BenchError

POLL_TIMEOUT_S = 0.5
PROBE = b"kmq-bench-probe"
# Settings a share consumer refuses: group-protocol ones (share groups take them from the broker), and the classic
# consumer's fetch-queue tuning.
_NOT_FOR_SHARE = frozenset(
    {
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "group.protocol",
        "partition.assignment.strategy",
        "fetch.queue.backoff.ms",
    }
)


class ShareContender:
    """Overhead of a batch: `acknowledge()` for each record plus the synchronous `commit_sync()` of those acks.

    A new share group starts at the log end (`share.auto.offset.reset=latest`, a group config the embedded mock
    cannot change), so `prepare` primes it: a probe record per partition until each has come back. Only then is the
    queue preloaded, and every record of it is delivered.
    """

    def __init__(self, config: KmqConfig, batch: int, partitions: int, work_us: int = 0) -> None:
        self._config = config
        self._work_us = work_us  # the CPU the handler burns per message, as every contender's does
        self._partitions = partitions
        settings = {**config.kafka_settings(), **config.consumer_kafka_config}
        settings = {k: v for k, v in settings.items() if k not in _NOT_FOR_SHARE}
        self._consumer = ShareConsumer(
            {
                **settings,
                "group.id": config.group_id,
                "share.acknowledgement.mode": "explicit",
                "max.poll.records": batch,
            }
        )
        self._consumer.subscribe([config.queue_topic])

    def prepare(self, deadline: float) -> None:
        """Send probes to the partitions none came back from yet, until every partition has returned one."""
        producer = Producer({**self._config.kafka_settings(), "linger.ms": 0})
        missing = set(range(self._partitions))
        while missing:
            if time.monotonic() > deadline:
                raise BenchError(f"{SHARE_UNAVAILABLE}: no record came back from partitions {sorted(missing)}")
            for partition in missing:
                producer.produce(self._config.queue_topic, PROBE, partition=partition)
            producer.flush(10)
            missing -= self._acknowledge_probes()

    def run(self, clock: BatchClock, progress: Callable[[int], None], stall_s: float) -> dict[str, Any]:
        consumer = self._consumer
        while not clock.done:
            records = [record for record in consumer.poll(POLL_TIMEOUT_S) if _ok(record)]
            arrived = time.perf_counter()
            if not records:
                clock.check_stall(stall_s)
                continue
            received = sum(record.value() != PROBE for record in records)  # the no-op processing; probes don't count
            for _ in range(received if self._work_us else 0):
                burn(self._work_us)
            began = time.perf_counter()
            for record in records:
                consumer.acknowledge(record)
            consumer.commit_sync()
            # A batch of priming probes only (left over) is acknowledged but not measured.
            if received and clock.batch(received, time.perf_counter() - began, arrived):
                progress(clock.received)
        return clock.figures()

    def close(self) -> None:
        self._consumer.close()

    def _acknowledge_probes(self) -> set[int]:
        records = [record for record in self._consumer.poll(POLL_TIMEOUT_S) if _ok(record)]
        for record in records:
            self._consumer.acknowledge(record)
        if records:
            self._consumer.commit_sync()
        return {record.partition() or 0 for record in records}


def _ok(record: Any) -> bool:
    """A record (not a consumer event); a fatal error raises."""
    error = record.error()
    if error is not None and error.fatal():
        raise KafkaException(error)
    return error is None
