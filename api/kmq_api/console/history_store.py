"""Where the overview's last hour survives a restart of the facade: a compacted topic (one partition) keyed by queue
and minute of the hour, so compaction keeps at most 60 records per queue — a ring of the last hour's minutes that
any replica writes and every replica reads back when it starts.

Chosen over querying Prometheus: the facade then needs no other service, and every replica sees the same history.
Blocking (librdkafka): call from a thread."""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import asdict, fields

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kmq.config import KmqConfig
from kmq.durability import default_replication_factor
from kmq.kafka import admin_settings, consumer_settings, producer_settings
from kmq_api.console.sample import Sample

_log = logging.getLogger(__name__)
TIMEOUT_S = 20.0
CLOSE_S = 2.0  # samples still unsent at shutdown are not worth a longer stop
MINUTE_MS = 60_000
_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.ms": str(3600 * 1000)}


class HistoryStore:
    """Samples of the queues on `topic`, one per queue and minute; `connection`: the Kafka settings to use."""

    def __init__(self, connection: KmqConfig, topic: str) -> None:
        self.connection = connection
        self.topic = topic
        self._producer: Producer | None = None

    def open(self) -> None:
        """Create the topic when missing (compacted, one partition)."""
        admin = AdminClient(admin_settings(self.connection))
        brokers = len(admin.list_topics(timeout=TIMEOUT_S).brokers)
        topic = NewTopic(self.topic, 1, default_replication_factor(brokers), config=_TOPIC_CONFIG)
        try:
            admin.create_topics([topic], request_timeout=TIMEOUT_S)[self.topic].result(TIMEOUT_S)
        except KafkaException as e:
            if not e.args or e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        self._producer = Producer(producer_settings(self.connection))

    def load(self, since_ms: int) -> list[tuple[str, Sample]]:
        """Every sample kept that is not older than `since_ms`, oldest first."""
        consumer = Consumer(
            consumer_settings(self.connection, f"kmq-console-history-{uuid.uuid4().hex[:8]}", enable_partition_eof=True)
        )
        consumer.assign([TopicPartition(self.topic, 0, 0)])
        found: dict[bytes, tuple[str, Sample]] = {}
        deadline = time.monotonic() + TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                record = consumer.poll(0.2)
                if record is None:
                    continue
                error = record.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        break
                    raise KafkaException(error)
                parsed = _decode(record.value())
                if parsed is not None:
                    found[record.key() or b""] = parsed  # the last record of a key wins, as compaction keeps it
        finally:
            consumer.close()
        kept = [item for item in found.values() if item[1].at_ms >= since_ms]
        return sorted(kept, key=lambda item: item[1].at_ms)

    def save(self, queue: str, sample: Sample) -> None:
        """Keep `sample` as the one of its minute (fire and forget: a lost one costs a point of the chart)."""
        if self._producer is None:
            return
        key = f"{queue}/{(sample.at_ms // MINUTE_MS) % 60}".encode()
        value = json.dumps({"queue": queue, **asdict(sample)}).encode()
        self._producer.produce(self.topic, value, key, on_delivery=self._delivered)
        self._producer.poll(0)

    def _delivered(self, error: KafkaError | None, _: object) -> None:
        if error is not None:
            _log.warning("console history: a sample was not stored on %s: %s", self.topic, error)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(CLOSE_S)


def _decode(value: bytes | None) -> tuple[str, Sample] | None:
    try:
        data = json.loads(value or b"")
        queue = str(data.pop("queue"))
        values: dict[str, int | None] = {}
        for field in fields(Sample):
            if field.default is None:  # a figure that may be unknown, or absent from an older record
                value = data.get(field.name)
                values[field.name] = None if value is None else int(value)
            else:
                values[field.name] = int(data[field.name])
        return queue, Sample(**values)  # type: ignore[arg-type]  # the required ones are ints
    except (ValueError, KeyError, TypeError):
        _log.warning("console history: a record that is not a sample, skipped")
        return None
