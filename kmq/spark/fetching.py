"""Reading single messages of the queue back by (partition, offset): a reject without the message's columns."""

from __future__ import annotations

import time
from collections.abc import Sequence

from confluent_kafka import Consumer, TopicPartition

from kmq import headers as h
from kmq.config import KmqConfig
from kmq.errors import DeliveryError
from kmq.kafka import consumer_settings
from kmq.markers import MarkerKey

Content = tuple[bytes | None, bytes | None, h.Headers]  # key, value, headers
_TIMEOUT_S = 30.0


def fetch_messages(config: KmqConfig, keys: Sequence[MarkerKey]) -> dict[MarkerKey, Content]:
    """The key, value and headers of each message; DeliveryError when one cannot be read (e.g. retention removed it)."""
    consumer = Consumer(consumer_settings(config, f"{config.group_id}__spark-fetch"))
    found: dict[MarkerKey, Content] = {}
    try:
        for key in sorted(set(keys)):
            found[key] = _one(consumer, config.queue_topic, key)
    finally:
        consumer.close()
    return found


def _one(consumer: Consumer, topic: str, key: MarkerKey) -> Content:
    consumer.assign([TopicPartition(topic, key.partition, key.offset)])
    deadline = time.monotonic() + _TIMEOUT_S
    while time.monotonic() < deadline:
        record = consumer.poll(0.5)
        if record is not None and record.error() is None and record.offset() == key.offset:
            return record.key(), record.value(), h.from_kafka(record.headers())
    raise DeliveryError(topic, key.partition, f"message at offset {key.offset} could not be read to dead-letter it")
