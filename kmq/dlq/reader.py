"""Reading the dead-letter topic: its dead letters (redrive markers applied) up to the end of every partition."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kmq import headers as h
from kmq.admin import topic_partitions
from kmq.config import KmqConfig
from kmq.dlq.records import REDRIVE_MARKER, DeadLetter, decode_marker
from kmq.errors import BrokerUnavailableError
from kmq.kafka import consumer_settings

POLL_S = 0.2
# A listing reads every partition to its end, where Apache Kafka parks the fetch for fetch.wait.max.ms (500 ms by
# default, more if the user long-polls) before librdkafka reports the end: pinned short, as the tracker's queue reader
# does. Measured on Kafka 4.4: an empty listing took ~0.5 s with the default, ~25 ms with this.
_END_FETCH_WAIT_MS = 10


def read_dead_letters(config: KmqConfig, timeout_s: float = 60.0) -> list[DeadLetter]:
    """Every dead letter of `config.dead_letter_topic` (committed records only), by partition and offset, each
    marked `redriven` when a redrive marker lists it. Markers themselves are not dead letters."""
    topic = config.dead_letter_topic
    partitions = topic_partitions(config, topic)
    settings = consumer_settings(
        config,
        f"kmq-dlq-reader-{uuid.uuid4().hex[:8]}",
        isolation_level="read_committed",
        enable_partition_eof=True,
        fetch_wait_max_ms=_END_FETCH_WAIT_MS,
    )
    consumer = Consumer(settings)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    found: list[DeadLetter] = []
    redriven: set[tuple[int, int]] = set()
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise BrokerUnavailableError(config.bootstrap_servers, f"reading {topic} took over {timeout_s:.0f}s")
            record = consumer.poll(POLL_S)
            if record is None:
                continue
            error = record.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(record.partition() or 0)
                elif error.fatal():
                    raise KafkaException(error)
                continue
            at_end.discard(record.partition() or 0)
            raw = h.from_kafka(record.headers())
            if h.get(raw, REDRIVE_MARKER) is not None:
                redriven.update(decode_marker(record.value()))
                continue
            found.append(
                DeadLetter.parse(
                    record.partition() or 0,
                    record.offset() or 0,
                    record.key(),
                    record.value(),
                    raw,
                    record.timestamp()[1],
                )
            )
    finally:
        consumer.close()
    found.sort(key=lambda dead: (dead.partition, dead.offset))
    return [_with_redriven(dead, redriven) for dead in found]


def _with_redriven(dead: DeadLetter, redriven: set[tuple[int, int]]) -> DeadLetter:
    return replace(dead, redriven=True) if (dead.partition, dead.offset) in redriven else dead
