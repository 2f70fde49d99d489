"""Purging dead letters: delete every record of a dead-letter partition before an offset (Kafka DeleteRecords).

Blocking (librdkafka): call from a thread."""

from __future__ import annotations

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from kmq.config import KmqConfig
from kmq.dlq import read_dead_letters
from kmq.errors import BrokerUnavailableError
from kmq.kafka import admin_settings

TIMEOUT_S = 30.0


def count_before(config: KmqConfig, partition: int, offset: int) -> int:
    """How many dead letters (redrive markers aside) partition `partition` holds below `offset`."""
    return sum(1 for dead in read_dead_letters(config) if dead.partition == partition and dead.offset < offset)


def purge_before(config: KmqConfig, partition: int, offset: int) -> None:
    admin = AdminClient(admin_settings(config))
    futures = admin.delete_records([TopicPartition(config.dead_letter_topic, partition, offset)])
    for future in futures.values():
        try:
            future.result(TIMEOUT_S)
        except KafkaException as e:
            raise BrokerUnavailableError(config.bootstrap_servers, f"purging {config.dead_letter_topic}: {e}") from e
