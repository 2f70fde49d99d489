"""The backlog of a queue: per partition, how far the worker group's committed position is behind the end.

The end offset comes from a fetch response (the high watermark librdkafka caches from it), not from ListOffsets:
a fetch is authoritative on every broker, while ListOffsets "latest" is not (some Kafka-compatible brokers answer
it wrongly). A small fetch from the committed position per partition costs one round trip and a few bytes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from kmq.config import KafkaValue, KmqConfig
from kmq.errors import BrokerUnavailableError, TopicMissingError

# Fetch as little as possible: only the first record (or the end-of-partition event) of each partition matters.
_PROBE: dict[str, KafkaValue] = {
    "enable.partition.eof": True,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 10,
    "fetch.max.bytes": 1024,
    "max.partition.fetch.bytes": 1024,
    "message.max.bytes": 1000,
    "queued.max.messages.kbytes": 1,
}


@dataclass(frozen=True, slots=True)
class PartitionLag:
    partition: int
    end_offset: int
    committed_offset: int | None
    backlog: int


class BacklogProbe:
    """Reads the worker group's committed offsets without joining the group. Blocking: call from a thread."""

    def __init__(self, config: KmqConfig, timeout_s: float = 5.0) -> None:
        self.config = config
        self._timeout_s = timeout_s
        settings = {**config.kafka_settings(), **config.consumer_kafka_config, **_PROBE, "group.id": config.group_id}
        self._consumer = Consumer(settings)
        self._lock = threading.Lock()

    def measure(self) -> list[PartitionLag]:
        with self._lock:
            try:
                return self._measure(time.monotonic() + self._timeout_s)
            except KafkaException as e:
                raise BrokerUnavailableError(self.config.bootstrap_servers, str(e.args[0] if e.args else e)) from e

    def close(self) -> None:
        self._consumer.close()

    def _measure(self, deadline: float) -> list[PartitionLag]:
        partitions = self._partitions()
        committed = self._committed(partitions)
        starts = [TopicPartition(self.config.queue_topic, p, _start(committed[p])) for p in partitions]
        self._consumer.assign(starts)
        try:
            first = self._first_offsets(len(partitions), deadline)
        finally:
            self._consumer.unassign()
        return [self._lag(p, committed[p], first[p]) for p in partitions]

    def _partitions(self) -> list[int]:
        topic = self.config.queue_topic
        metadata = self._consumer.list_topics(topic, timeout=self._timeout_s).topics.get(topic)
        if metadata is None or metadata.error is not None:
            raise TopicMissingError(topic, self.config.bootstrap_servers)
        return sorted(metadata.partitions)

    def _committed(self, partitions: list[int]) -> dict[int, int | None]:
        wanted = [TopicPartition(self.config.queue_topic, p) for p in partitions]
        found = self._consumer.committed(wanted, timeout=self._timeout_s)
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in found}

    def _first_offsets(self, count: int, deadline: float) -> dict[int, int]:
        """Per partition, the offset of the first record at or after the start, or the end offset when none is."""
        first: dict[int, int] = {}
        while len(first) < count:
            if time.monotonic() > deadline:
                detail = f"no fetch answer for {count - len(first)} partitions of {self.config.queue_topic}"
                raise BrokerUnavailableError(self.config.bootstrap_servers, detail)
            for event in self._consumer.consume(count, timeout=0.1):
                error = event.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                first.setdefault(event.partition() or 0, event.offset() or 0)
        return first

    def _lag(self, partition: int, committed: int | None, first_offset: int) -> PartitionLag:
        tp = TopicPartition(self.config.queue_topic, partition)
        _, end = self._consumer.get_watermark_offsets(tp, cached=True)
        end = max(end, first_offset)
        return PartitionLag(partition, end, committed, max(0, end - first_offset))


def _start(committed: int | None) -> int:
    """Where the worker group resumes: its committed offset, else the beginning (kmq's `auto.offset.reset`)."""
    return OFFSET_BEGINNING if committed is None else committed
