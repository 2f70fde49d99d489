"""Partitions added to a live queue: a misaligned count is reported, and once both topics have them the tracker
owns the new partitions and redelivers their messages; a running client and the REST facade's replicas serve them
without a restart (Apache Kafka: tansu cannot add partitions; a Spark stream: tests/integration/spark)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from fastapi.testclient import TestClient

from kmq.admin import grow_topics
from kmq.client import KmqClient
from kmq.embedded import KafkaCluster
from kmq.errors import ConfigError
from kmq.message import Message
from kmq.producer import KmqProducer, OutgoingMessage
from kmq_tracker import TrackerConfig, TrackerService
from tests.conftest import MakeConfig
from tests.helpers import tracker_settled, wait_for
from tests.integration.test_api_replicas import receive, replica, statuses

FAST_METADATA = {"topic.metadata.refresh.interval.ms": 500}


@pytest.fixture(autouse=True)
def _adds_partitions(kafka: KafkaCluster) -> None:
    if kafka.backend in ("tansu", "mock"):
        pytest.skip(f"the {kafka.backend} broker cannot add partitions to a topic")


def test_partitions_added_to_a_running_queue_are_tracked(kafka: KafkaCluster, make_config: MakeConfig) -> None:
    config = make_config(partitions=2, msg_timeout_ms=1000, consumer_kafka_config=FAST_METADATA)
    tracker_config = TrackerConfig(kmq=config, http_port=0, commit_interval_ms=200, topic_check_interval_ms=200)
    with TrackerService(tracker_config) as tracker, KmqClient(config) as client:
        assert tracker.wait_ready(60)
        # given a client that has already written markers (its producers know the markers topic's 2 partitions)
        with KmqProducer(config) as producer:
            producer.send(b"before", partition=0)
        [before] = _receive(client, 1)
        client.processed(before)
        # when the queue alone grows, the tracker reports it
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        admin.create_partitions([NewPartitions(config.queue_topic, 4)])[config.queue_topic].result(timeout=30)
        misaligned = lambda: tracker.metrics.value("kmq_topics_misaligned")  # noqa: E731
        wait_for(lambda: misaligned() == 1, 30, what="the misalignment reported")
        # and once the markers topic follows, it owns the new partitions and redelivers their messages
        grow_topics(config, 4)
        wait_for(lambda: misaligned() == 0, 30, what="the alignment restored")
        wait_for(lambda: set(tracker.partitions()) == {0, 1, 2, 3}, 30, what="the new partitions assigned")
        with KmqProducer(config) as producer:
            producer.send_batch(OutgoingMessage(f"p{p}".encode(), partition=p) for p in (2, 3))
        # and the running client serves them: STARTs and ENDs on markers partitions it had not heard of
        first = _receive(client, 2)
        assert {m.partition for m in first} == {2, 3} and all(m.redelivery_count == 0 for m in first)
        again = _receive(client, 2)  # never acknowledged: the tracker sends them again
        assert {(m.partition, m.value, m.redelivery_count) for m in again} == {(2, b"p2", 1), (3, b"p3", 1)}
        for msg in again:
            client.processed(msg)
        client.flush()
        assert client.failed_markers == 0
        wait_for(lambda: tracker_settled(tracker), 30, what="nothing pending")


def test_the_rest_facade_serves_and_settles_partitions_added_while_it_runs(make_config: MakeConfig) -> None:
    # given two facade replicas serving a queue of 2 partitions
    config = make_config(partitions=2, consumer_kafka_config=FAST_METADATA)
    with replica(config) as first, replica(config) as second:
        path = f"/v1/queues/{config.queue_topic}"
        assert first.post(f"{path}/messages", json={"messages": [{"value": "before"}]}).status_code == 200
        [before] = receive(first, config, 1)
        assert statuses(second, config, "ack", [before["receipt"]]) == ["ok"]  # both replicas are reading notes
        # when the queue grows to 4 partitions and messages land on the new ones
        grow_topics(config, 4)
        with KmqProducer(config) as producer:
            producer.send_batch(OutgoingMessage(f"p{p}".encode(), partition=p) for p in (2, 3))
        # then a replica receives them and the other acks them: the second ack of each, through the first replica,
        # is refused as already settled (each replica read the other's notes on the new partitions)
        received = receive(first, config, 2, timeout_s=60)
        assert {m["partition"] for m in received} == {2, 3}
        receipts, known = [m["receipt"] for m in received], notes(first)
        assert statuses(second, config, "ack", receipts) == ["ok", "ok"]
        wait_for(lambda: notes(first) >= known + 2, 30, what="the first replica reading the new partitions' notes")
        again = first.post(f"{path}/ack", json={"receipts": receipts[:1]})
        assert again.status_code == 409 and "already settled by ack" in again.text, again.text


def notes(replica: TestClient) -> float:
    """The ack and nack notes a facade replica has read from the markers topic (its `kmq_api_receipt_notes`)."""
    for line in replica.get("/metrics").text.splitlines():
        if line.startswith("kmq_api_receipt_notes{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no kmq_api_receipt_notes in /metrics")


def test_grow_refuses_to_shrink_naming_the_counts(make_config: MakeConfig) -> None:
    config = make_config(partitions=3)
    with pytest.raises(ConfigError, match=r"cannot remove partitions: ask for 3 or more.*has 3"):
        grow_topics(config, 2)
    grow_topics(config, 3)  # already there: nothing to do


def _receive(client: KmqClient, count: int, timeout_s: float = 60) -> list[Message]:
    received: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(received) < count:
        assert time.monotonic() < deadline, f"received {len(received)} of {count} in {timeout_s} s"
        received += client.receive(max_messages=count, timeout_s=0.2)
    return received
