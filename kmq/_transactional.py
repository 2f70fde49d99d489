"""Transactional mode: START markers and the queue offset commit in one Kafka transaction (PROTOCOL.md)."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kmq.config import KmqConfig
from kmq.errors import DeliveryError, MarkerWriteError
from kmq.kafka import marker_producer_settings
from kmq.marker_writer import Offsets, StartWriter, first_of


class TransactionalStarts:
    """Writes a batch's STARTs and commits its offsets atomically: a START exists iff its offset was committed."""

    def __init__(self, config: KmqConfig, consumer: Consumer) -> None:
        self.config = config
        self._consumer = consumer
        settings = marker_producer_settings(config, transactional_id=f"{config.group_id}-{uuid.uuid4().hex}")
        producer = Producer(settings)
        producer.init_transactions(30.0)
        self._writer = StartWriter(config, producer)

    def starts_and_commit(
        self, offsets: Offsets, commit: list[TopicPartition], redeliver_after_ms: int, timeout_s: float
    ) -> None:
        """On failure the transaction is aborted and MarkerWriteError raised."""
        producer = self._writer.producer
        producer.begin_transaction()
        try:
            failures = self._writer.produce(offsets, redeliver_after_ms)
            producer.send_offsets_to_transaction(commit, self._consumer.consumer_group_metadata(), timeout_s)
            producer.commit_transaction(timeout_s)
            self._writer.wait(failures, timeout_s)
        except (KafkaException, DeliveryError) as e:
            self._abort(timeout_s)
            raise MarkerWriteError(self.config.markers_topic, *first_of(offsets), str(e)) from e

    def flush(self, timeout_s: float) -> int:
        return self._writer.flush(timeout_s)

    def _abort(self, timeout_s: float) -> None:
        try:
            self._writer.producer.abort_transaction(timeout_s)
        except KafkaException as e:
            raise MarkerWriteError(self.config.markers_topic, -1, -1, f"abort failed: {e}") from e
