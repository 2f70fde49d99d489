"""Reading a whole partition of a topic on an executor, in chunks (the batch sources `kmq` and `kmq-markers`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaMessage

from kmq.config import KmqConfig
from kmq.kafka import consumer_settings

_log = logging.getLogger(__name__)


def _ok(record: KafkaMessage) -> bool:
    error = record.error()
    if error is None:
        return True
    if error.fatal():
        raise KafkaException(error)
    if error.code() != KafkaError._PARTITION_EOF:
        _log.warning("reading %s[%s]: %s", record.topic(), record.partition(), error.str())
    return False


def read_to_end(config: KmqConfig, topic: str, partition: int, chunk_size: int) -> Iterator[list[KafkaMessage]]:
    """Chunks of every record of one partition of `topic`, from its beginning to its end (partition EOF)."""
    settings = consumer_settings(config, f"{config.group_id}__spark-batch", enable_partition_eof=True)
    consumer = Consumer(settings)
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    try:
        while True:
            records = consumer.consume(num_messages=min(chunk_size, 10_000), timeout=0.5)
            chunk = [record for record in records if _ok(record)]
            if chunk:
                yield chunk
            if any(_at_eof(record) for record in records):
                return
    finally:
        consumer.close()


def _at_eof(record: KafkaMessage) -> bool:
    error = record.error()
    return error is not None and error.code() == KafkaError._PARTITION_EOF
