"""Restarting the tracker: it resumes at the committed pending tail, and redelivers only what is really due."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from kmq import headers as h
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.markers import MarkerKey
from kmq.message import Message
from kmq.producer import KmqProducer, OutgoingMessage
from kmq_tracker import TrackerConfig, TrackerService
from tests.helpers import read_topic, wait_for
from tests.integration.marker_formats import FORMATS, pending_tail, with_marker_format

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]
PARTITIONS = 2
PER_PARTITION = 20


@pytest.fixture(params=FORMATS)
def make_config(make_config: MakeConfig, request: pytest.FixtureRequest) -> MakeConfig:
    """Every test here runs with both marker formats."""
    return with_marker_format(make_config, request.param)


@contextmanager
def running_tracker(config: KmqConfig, **overrides: Any) -> Iterator[TrackerService]:
    settings: dict[str, Any] = {"http_enabled": False, "commit_interval_ms": 100, **overrides}
    service = TrackerService(TrackerConfig(kmq=config, **settings)).run_in_thread()
    try:
        assert service.wait_ready(30), "tracker not ready within 30 s"
        yield service
    finally:
        service.stop()


def send(config: KmqConfig, per_partition: int, tag: str) -> None:
    with KmqProducer(config) as producer:
        producer.send_batch(
            OutgoingMessage(f"{tag}{p}-{i}".encode(), headers=[("tag", tag.encode())], partition=p)
            for p in range(PARTITIONS)
            for i in range(per_partition)
        )


def receive(client: KmqClient, count: int, timeout_s: float = 30.0, **options: Any) -> list[Message]:
    received: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(received) < count:
        assert time.monotonic() < deadline, f"received {len(received)} of {count} messages in {timeout_s}s"
        received += client.receive(max_messages=count - len(received), timeout_s=0.2, **options)
    return received


def committed_tail(config: KmqConfig, group_id: str) -> dict[int, int]:
    consumer = Consumer({**config.kafka_settings(), "group.id": group_id, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(config.markers_topic, p) for p in range(PARTITIONS)]
        return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
    finally:
        consumer.close()


def test_a_restarted_tracker_resumes_at_the_pending_tail_and_redelivers_only_what_is_due(
    make_config: MakeConfig,
) -> None:
    config = make_config(partitions=PARTITIONS, msg_timeout_ms=600_000)
    group_id = TrackerConfig(kmq=config).group_id
    send(config, PER_PARTITION, "a")
    with KmqClient(config) as client:
        with running_tracker(config) as first:
            # given: per partition, 15 messages acknowledged, 3 nacked to come back after 4 s, 2 left pending
            received = sorted(receive(client, PARTITIONS * PER_PARTITION), key=lambda m: (m.partition, m.offset))
            acked = [m for m in received if m.offset < 15]
            nacked = [m for m in received if 15 <= m.offset < 18]
            waiting = [m for m in received if m.offset >= 18]
            for msg in acked:
                client.processed(msg)
            for msg in nacked:
                client.nack(msg, delay_ms=4000)
            client.flush()
            wait_for(lambda: sum(s.pending for s in first.partitions().values()) == 10, 10, what="10 pending")
        # and, while no tracker runs, messages whose deadlines pass before they are acknowledged
        send(config, 10, "b")
        late = receive(client, PARTITIONS * 10, msg_timeout_ms=100)
        wait_for(lambda: time.time_ns() // 1_000_000 > max(m.deadline_ms for m in late) + 50, 5, what="deadlines")
        for msg in late:
            client.processed(msg)
        client.flush()

        # then the stopped tracker committed, per partition, its oldest pending START
        committed = committed_tail(config, group_id)
        assert committed == pending_tail(read_topic(config, config.markers_topic, PARTITIONS), PARTITIONS)

        # when a new tracker starts, reading the markers in small fetches (STARTs and ENDs in different turns)
        small_fetches = {**config.consumer_kafka_config, "max.partition.fetch.bytes": 64, "queued.min.messages": 1}
        with running_tracker(config.with_overrides(consumer_kafka_config=small_fetches)) as second:
            # then it resumed at the committed offsets, never re-reading older markers
            assert {p: s.first_offset for p, s in second.partitions().items()} == committed
            # and it redelivers the nacked messages when due, and nothing else
            copies = receive(client, len(nacked), timeout_s=20)
            for msg in copies:
                client.processed(msg)
            client.flush()
            # (the copies' own STARTs and ENDs come and go; the 4 waiting messages stay pending, untouched)
            wait_for(lambda: sum(s.pending for s in second.partitions().values()) == 4, 10, what="4 pending")
            assert second.metrics.value("kmq_redeliveries_total") == len(nacked)

    assert sorted((c.partition, h.original_offset(c.headers, c.offset)) for c in copies) == sorted(
        (m.partition, m.offset) for m in nacked
    )
    copies_on_queue = [
        r for r in read_topic(config, config.queue_topic, PARTITIONS) if h.get(r.headers, h.ORIGINAL_OFFSET)
    ]
    assert len(copies_on_queue) == len(nacked)
    assert {MarkerKey(m.partition, m.offset) for m in waiting}.isdisjoint(
        {MarkerKey(r.partition, h.original_offset(r.headers, r.offset)) for r in copies_on_queue}
    )
