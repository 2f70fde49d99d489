"""Tracker replicas as child processes (`python -m kmq_tracker`): they split the partitions, and survive each other."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from kmq import headers as h
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.message import Message
from kmq.producer import KmqProducer, OutgoingMessage
from kmq_tracker import TrackerConfig
from kmq_tracker.process import TrackerProcess
from tests.helpers import wait_for
from tests.integration.marker_formats import FORMATS, with_marker_format

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]
PARTITIONS = 4


@pytest.fixture(params=FORMATS)
def make_config(make_config: MakeConfig, request: pytest.FixtureRequest) -> MakeConfig:
    """Every test here runs with both marker formats."""
    return with_marker_format(make_config, request.param)


def send(config: KmqConfig, per_partition: int) -> None:
    with KmqProducer(config) as producer:
        producer.send_batch(
            OutgoingMessage(f"m{p}-{i}".encode(), headers=[("n", str(i).encode())], partition=p)
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


def split_between(a: TrackerProcess, b: TrackerProcess) -> bool:
    owned_a, owned_b = a.owned_partitions(), b.owned_partitions()
    return bool(owned_a and owned_b) and sorted(owned_a + owned_b) == list(range(PARTITIONS))


def pending(replica: TrackerProcess) -> float:
    return sum(v for k, v in replica.metrics().items() if k.startswith("kmq_pending_messages{"))


def test_the_survivor_of_a_sigkill_redelivers_the_dead_replicas_pending_messages(
    make_config: MakeConfig, tmp_path: Path
) -> None:
    config = make_config(partitions=PARTITIONS, msg_timeout_ms=600_000)
    tracker_config = TrackerConfig(kmq=config, commit_interval_ms=200)
    with (
        TrackerProcess(tracker_config, tmp_path / "a.log") as a,
        TrackerProcess(tracker_config, tmp_path / "b.log") as b,
    ):
        a.wait_ready(30)
        b.wait_ready(30)
        # given two replicas in one group, each owning some of the partitions
        wait_for(lambda: split_between(a, b), 20, what="the partitions split between the two replicas")
        owned_by_a = a.owned_partitions()
        send(config, 10)
        with KmqClient(config) as client:
            # and, per partition, 2 of 10 messages left unacknowledged with a 3 s deadline
            received = receive(client, PARTITIONS * 10, msg_timeout_ms=3000)
            unacked = [m for m in received if m.offset >= 8]
            for msg in received:
                if msg.offset < 8:
                    client.processed(msg)
            client.flush()
            wait_for(lambda: pending(a) + pending(b) == len(unacked), 10, what="both replicas tracking them")
            # when one replica is killed outright
            a.kill()
            # then the survivor takes its partitions over and redelivers their pending messages too
            wait_for(lambda: b.owned_partitions() == list(range(PARTITIONS)), 30, what="b owning every partition")
            copies = receive(client, len(unacked), timeout_s=30)
            for copy in copies:
                client.processed(copy)
            client.flush()
            # (the counter follows the pass's settling, which can come a turn after its ENDs are read back)
            wait_for(
                lambda: pending(b) == 0 and b.metrics()["kmq_redeliveries_total"] >= len(unacked),
                10,
                what="the copies acknowledged and counted",
            )
        assert b.metrics()["kmq_redeliveries_total"] == len(unacked)
        # and a SIGTERM stops it cleanly
        assert b.stop() == 0
    assert {(c.partition, h.original_offset(c.headers, c.offset)) for c in copies} == {
        (m.partition, m.offset) for m in unacked
    }
    assert {c.partition for c in copies} >= set(owned_by_a)
    assert all(c.redelivery_count == 1 for c in copies)


def test_sigterm_leaves_the_group_at_once_and_commits(make_config: MakeConfig, tmp_path: Path) -> None:
    # given a 6 s session: a replica that merely vanished would keep its partitions that long
    config = make_config(partitions=PARTITIONS, msg_timeout_ms=600_000)
    session_ms = 6000
    consumer_config = {**config.consumer_kafka_config, "session.timeout.ms": session_ms, "heartbeat.interval.ms": 500}
    # and no periodic commit within the test: only the shutdown commits
    tracker_config = TrackerConfig(
        kmq=config.with_overrides(consumer_kafka_config=consumer_config), commit_interval_ms=600_000
    )
    with (
        TrackerProcess(tracker_config, tmp_path / "a.log") as a,
        TrackerProcess(tracker_config, tmp_path / "b.log") as b,
    ):
        a.wait_ready(60)
        b.wait_ready(60)
        wait_for(lambda: split_between(a, b), 60, what="the partitions split between the two replicas")
        owned_by_a = a.owned_partitions()
        send(config, 5)
        with KmqClient(config) as client:
            receive(client, PARTITIONS * 5)  # pending in every partition
            client.flush()
        wait_for(lambda: pending(a) + pending(b) == PARTITIONS * 5, 10, what="both replicas tracking them")
        # when one replica gets SIGTERM
        assert a.stop() == 0
        stopped = time.monotonic()
        # then it left the group (its partitions move before its session could expire) and committed its tail
        wait_for(lambda: b.owned_partitions() == list(range(PARTITIONS)), 30, what="b owning every partition")
        took_s = time.monotonic() - stopped
        assert took_s < session_ms / 1000, f"partitions moved after {took_s:.1f}s: the replica did not leave the group"
        # (every START is pending, so the tail is offset 0; b commits nothing of a's partitions before it stops)
        committed = committed_offsets(config, tracker_config.group_id)
        assert {p: committed[p] for p in owned_by_a} == dict.fromkeys(owned_by_a, 0)
        wait_for(lambda: pending(b) == PARTITIONS * 5, 10, what="b tracking every pending message")
        assert b.stop() == 0


def committed_offsets(config: KmqConfig, group_id: str) -> dict[int, int]:
    consumer = Consumer({**config.kafka_settings(), "group.id": group_id, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(config.markers_topic, p) for p in range(PARTITIONS)]
        return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
    finally:
        consumer.close()
