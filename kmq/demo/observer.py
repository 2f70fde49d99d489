"""`TopicObserver`: reads the queue, results and dead-letter topics from the beginning into a `Tally`."""

from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka import Message as KafkaMessage

from kmq import headers as h
from kmq.admin import topic_partitions
from kmq.config import KmqConfig
from kmq.demo.tally import Tally
from kmq.errors import DemoError
from kmq.kafka import consumer_settings

_log = logging.getLogger(__name__)
_BATCH = 2_000


class TopicObserver:
    """A group-less reader (it assigns every partition itself and commits nothing)."""

    def __init__(self, config: KmqConfig, results_topic: str, tally: Tally | None = None) -> None:
        self.tally = tally if tally is not None else Tally()
        self._topics = (config.queue_topic, results_topic, config.dead_letter_topic)
        self._queue, self._results, self._dead = self._topics
        partitions = [(topic, p) for topic in self._topics for p in range(topic_partitions(config, topic))]
        self._unfinished = set(partitions)
        group = f"{config.queue_topic}__demo-observer"
        self._consumer = Consumer(consumer_settings(config, group, enable_partition_eof=True))
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for topic, p in partitions])

    def poll(self, timeout_s: float) -> int:
        """Feed the tally with what arrived; the number of records read."""
        records = self._consumer.consume(num_messages=_BATCH, timeout=timeout_s)
        for record in records:
            self._feed(record)
        return len(records)

    def read_to_end(self, timeout_s: float) -> Tally:
        """Read every partition of the three topics up to its end (partition EOF); writers must have stopped."""
        deadline = time.monotonic() + timeout_s
        while self._unfinished:
            if time.monotonic() > deadline:
                left = ", ".join(f"{t}[{p}]" for t, p in sorted(self._unfinished))
                raise DemoError(f"could not read to the end of {left} within {timeout_s:.0f}s")
            self.poll(0.2)
        return self.tally

    def close(self) -> None:
        self._consumer.close()

    def _feed(self, record: KafkaMessage) -> None:
        topic, partition = record.topic() or "", record.partition() or 0
        error = record.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self._unfinished.discard((topic, partition))
            else:
                _log.warning("reading %s[%d]: %s", topic, partition, error.str())
            return
        self._unfinished.add((topic, partition))
        if topic == self._queue:
            self.tally.add_queued(record.value(), h.from_kafka(record.headers()))
        elif topic == self._results:
            self.tally.add_processed(record.value())
        else:
            self.tally.add_dead(record.value(), h.from_kafka(record.headers()))
