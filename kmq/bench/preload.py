"""Fresh topics for each run, and the messages a run consumes (produced before its measured window)."""

from __future__ import annotations

import os
import uuid

from confluent_kafka import KafkaError, Producer
from confluent_kafka import Message as KafkaMessage

from kmq.bench.options import KMQ_CLIENTS
from kmq.config import KafkaValue, KmqConfig
from kmq.embedded import KafkaCluster
from kmq.errors import BenchError
from kmq.kafka import DeliveryCallback, producer_settings

FLUSH_TIMEOUT_S = 120.0
# Every consumer contender alike. librdkafka postpones a partition's next fetch by fetch.queue.backoff.ms (1000 ms by
# default) whenever its local queue holds more than queued.min.messages: a consumer that drains faster than that refills
# (the plain one) was held to ~145k msgs/s on both brokers, a cap of librdkafka's defaults, not a ceiling.
CONSUMER_TUNING: dict[str, KafkaValue] = {"fetch.queue.backoff.ms": 10}
_POLL_EVERY = 1000


def fresh_queue(cluster: KafkaCluster, contender: str, partitions: int) -> KmqConfig:
    """A config for a new queue `kmq-bench-<contender>-<uuid8>`: its own topics and group, so runs never share."""
    name = f"kmq-bench-{contender}-{uuid.uuid4().hex[:8]}"
    config = cluster.config(name, consumer_kafka_config=CONSUMER_TUNING)
    if contender in KMQ_CLIENTS:
        config = config.with_overrides(marker_format=KMQ_CLIENTS[contender])
        cluster.ensure_topics(config, partitions)  # queue, markers, dead letters
    else:
        cluster.create_topics({config.queue_topic: partitions})
    return config


def preload(config: KmqConfig, messages: int, size: int, partitions: int, keys: int = 0) -> None:
    """`messages` random values of `size` bytes, round-robin over the partitions, all acknowledged (acks=all); with
    `keys`, message i has the key `i % keys` (the partition stays round-robin: keys are spread over every one)."""
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, message: KafkaMessage) -> None:
        failures.append(error.str() if error is not None else "?")

    settings = {**producer_settings(config), "linger.ms": 20, "delivery.report.only.error": True}
    producer = Producer(settings)
    value = os.urandom(size)
    for index in range(messages):
        key = str(index % keys).encode() if keys else None
        _produce(producer, config.queue_topic, value, key, index % partitions, on_delivery)
        if index % _POLL_EVERY == 0:
            producer.poll(0)
    if producer.flush(FLUSH_TIMEOUT_S) or failures:
        detail = failures[0] if failures else "not acknowledged in time"
        raise BenchError(f"preloading {config.queue_topic} failed: {detail}")


def _produce(
    producer: Producer, topic: str, value: bytes, key: bytes | None, partition: int, on_delivery: DeliveryCallback
) -> None:
    while True:
        try:
            producer.produce(topic, value, key, partition=partition, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)  # the local queue is full: serve delivery reports to make room
        else:
            return
