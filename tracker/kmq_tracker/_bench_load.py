"""The load side of the tracker benchmark: markers to ingest, and expiring messages whose copies are timed."""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka import Message as KafkaMessage

from kmq import headers as h
from kmq.batch_markers import BatchEnd, BatchStart, runs_of
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.kafka import fetch, produce, producer_settings
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq.producer import KmqProducer, OutgoingMessage

_BULK = {"linger_ms": 50, "batch_num_messages": 10_000, "queue_buffering_max_messages": 1_000_000}


def write_markers(config: KmqConfig, partitions: int, pending: int, ended: int, redeliver_after_ms: int) -> int:
    """`pending` STARTs and `ended` START+END pairs, spread evenly over the keys; returns the records written."""
    producer = Producer(producer_settings(config, **_BULK))
    failures: list[str] = []
    start, end = StartMarker(redeliver_after_ms).encode(), EndMarker().encode()
    keys, written = pending + ended, 0

    def on_delivery(error: KafkaError | None, _message: KafkaMessage) -> None:
        if error is not None:
            failures.append(error.str())

    for i in range(keys):
        partition = i % partitions
        key = MarkerKey(partition, i // partitions).encode()
        produce(producer, config.markers_topic, start, key, partition=partition, on_delivery=on_delivery)
        written += 1
        if (i * ended) // keys != ((i + 1) * ended) // keys:
            produce(producer, config.markers_topic, end, key, partition=partition, on_delivery=on_delivery)
            written += 1
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining or failures:
        raise RuntimeError(f"writing markers failed: {remaining} unacknowledged, first error {failures[:1]}")
    return written


BATCH = 500  # the client's default batch: one BATCH START per partition per batch of this many offsets


def write_batch_markers(config: KmqConfig, partitions: int, pending: int, ended: int, redeliver_after_ms: int) -> int:
    """`write_markers` in the batch format: per partition, a BATCH START per `BATCH` consecutive offsets, then a BATCH
    END for those of them that are ended (spread evenly, as there); returns the records written."""
    producer = Producer(producer_settings(config, **_BULK))
    failures: list[str] = []
    keys, written = pending + ended, 0

    def on_delivery(error: KafkaError | None, _message: KafkaMessage) -> None:
        if error is not None:
            failures.append(error.str())

    per_partition = -(-keys // partitions)
    for first in range(0, per_partition, BATCH):
        for partition in range(partitions):
            indexes = [o * partitions + partition for o in range(first, min(first + BATCH, per_partition))]
            offsets = [i // partitions for i in indexes if i < keys]
            if not offsets:
                continue
            key = MarkerKey(partition, offsets[0]).encode()
            value = BatchStart(redeliver_after_ms, runs_of(offsets)).encode()
            produce(producer, config.markers_topic, value, key, partition=partition, on_delivery=on_delivery)
            done = [i // partitions for i in indexes if i < keys and (i * ended) // keys != ((i + 1) * ended) // keys]
            written += 1
            if done:
                end = BatchEnd(runs_of(done)).encode()
                key = MarkerKey(partition, done[0]).encode()
                produce(producer, config.markers_topic, end, key, partition=partition, on_delivery=on_delivery)
                written += 1
        producer.poll(0)
    remaining = producer.flush(120)
    if remaining or failures:
        raise RuntimeError(f"writing markers failed: {remaining} unacknowledged, first error {failures[:1]}")
    return written


def measure_lateness(config: KmqConfig, count: int, timeout_s: float = 120.0) -> dict[str, Any]:
    """Send `count` messages, receive them without acknowledging, and time each copy against its deadline."""
    with KmqProducer(config) as producer:
        sent = producer.send_batch(OutgoingMessage(f"bench-{i}".encode()) for i in range(count))
    copies_from = {p: max(s.offset for s in sent if s.partition == p) + 1 for p in {s.partition for s in sent}}
    observer = _observer(config, copies_from)
    try:
        with KmqClient(config) as client:
            deadlines = _receive_deadlines(client, count, timeout_s)
        lateness_ms = _observe_copies(observer, deadlines, timeout_s)
    finally:
        observer.close()
    return _summary(lateness_ms, count)


def _observer(config: KmqConfig, copies_from: dict[int, int]) -> Consumer:
    settings = {
        **config.kafka_settings(),
        **config.consumer_kafka_config,
        "group.id": f"kmq-bench-observer-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
    }
    consumer = Consumer(settings)
    consumer.assign([TopicPartition(config.queue_topic, p, offset) for p, offset in copies_from.items()])
    return consumer


def _receive_deadlines(client: KmqClient, count: int, timeout_s: float) -> dict[tuple[int, int], int]:
    deadlines: dict[tuple[int, int], int] = {}
    stop_at = time.monotonic() + timeout_s
    while len(deadlines) < count and time.monotonic() < stop_at:
        for msg in client.receive(max_messages=count - len(deadlines), timeout_s=0.2):
            deadlines[(msg.partition, msg.offset)] = msg.deadline_ms
    return deadlines


def _observe_copies(observer: Consumer, deadlines: dict[tuple[int, int], int], timeout_s: float) -> list[int]:
    lateness_ms: dict[tuple[int, int], int] = {}
    stop_at = time.monotonic() + timeout_s
    while len(lateness_ms) < len(deadlines) and time.monotonic() < stop_at:
        batch = fetch(observer, 1000, 0.05)
        seen_ms = time.time_ns() // 1_000_000
        for msg in batch:
            if msg.error() is not None:
                continue
            headers = h.from_kafka(msg.headers())
            origin = (msg.partition() or 0, h.original_offset(headers, msg.offset() or 0))
            if origin in deadlines and origin not in lateness_ms:
                lateness_ms[origin] = seen_ms - deadlines[origin]
    return list(lateness_ms.values())


def _summary(lateness_ms: list[int], expected: int) -> dict[str, Any]:
    if len(lateness_ms) < 2:
        return {"lateness_messages": len(lateness_ms), "lateness_not_redelivered": expected - len(lateness_ms)}
    cuts = statistics.quantiles(lateness_ms, n=100, method="inclusive")
    return {
        "lateness_messages": len(lateness_ms),
        "lateness_not_redelivered": expected - len(lateness_ms),
        "lateness_p50_ms": cuts[49],
        "lateness_p95_ms": cuts[94],
        "lateness_p99_ms": cuts[98],
        "lateness_max_ms": max(lateness_ms),
        "lateness_min_ms": min(lateness_ms),
    }
