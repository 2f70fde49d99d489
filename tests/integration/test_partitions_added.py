"""Partitions added to a live queue: a misaligned count is reported, and once both topics have them the tracker
owns the new partitions and redelivers their messages (Apache Kafka: tansu cannot add partitions)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from kmq.admin import grow_topics
from kmq.client import KmqClient
from kmq.embedded import KafkaCluster
from kmq.errors import ConfigError
from kmq.message import Message
from kmq.producer import KmqProducer, OutgoingMessage
from tests.conftest import MakeConfig
from tests.helpers import wait_for
from tracker import TrackerConfig, TrackerService

FAST_METADATA = {"topic.metadata.refresh.interval.ms": 500}


@pytest.fixture(autouse=True)
def _adds_partitions(kafka: KafkaCluster) -> None:
    if kafka.backend in ("tansu", "mock"):
        pytest.skip(f"the {kafka.backend} broker cannot add partitions to a topic")


def test_partitions_added_to_a_running_queue_are_tracked(kafka: KafkaCluster, make_config: MakeConfig) -> None:
    config = make_config(partitions=2, msg_timeout_ms=1000, consumer_kafka_config=FAST_METADATA)
    tracker_config = TrackerConfig(kmq=config, http_port=0, commit_interval_ms=200, topic_check_interval_ms=200)
    with TrackerService(tracker_config) as tracker:
        assert tracker.wait_ready(60)
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
        with KmqClient(config) as client:
            first = _receive(client, 2)
            assert {m.partition for m in first} == {2, 3} and all(m.redelivery_count == 0 for m in first)
            again = _receive(client, 2)  # never acknowledged: the tracker sends them again
            assert {(m.partition, m.value, m.redelivery_count) for m in again} == {(2, b"p2", 1), (3, b"p3", 1)}
            for msg in again:
                client.processed(msg)


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
