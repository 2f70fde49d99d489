"""The Apache Kafka backend for real: restart on the same data, a broker that dies at start, broker-side time."""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from kmq.admin import check_topics, ensure_topics
from kmq.embedded import EmbeddedKafka, KafkaCluster
from kmq.errors import EmbeddedBrokerError
from kmq.markers import MarkerKey, StartMarker
from tests.conftest import MakeConfig
from tests.helpers import read_topic


@pytest.fixture
def own_kafka() -> EmbeddedKafka:
    """A Kafka node of this test's own, for tests that stop it (the session's broker stays up)."""
    return EmbeddedKafka("kafka")


def test_a_restarted_broker_keeps_its_data_and_its_port(own_kafka: EmbeddedKafka) -> None:
    with own_kafka as kafka:
        kafka.create_topics({"kept": 2})
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
        producer.produce("kept", b"before the restart", partition=1)
        assert producer.flush(10) == 0
        address, first_pid = kafka.bootstrap_servers, kafka.pid
        kafka.stop(keep_data=True)
        assert not kafka.running()
        kafka.start()
        assert (kafka.bootstrap_servers, kafka.running()) == (address, True) and kafka.pid != first_pid
        config = kafka.config("kept")
        assert [r.value for r in read_topic(config, "kept", 2)] == [b"before the restart"]
        log_file = kafka.log_file
        assert log_file is not None and "Kafka Server started" in Path(log_file).read_text()
    assert kafka.log_file is None, "stop() removes the data folder and its log"


def test_a_broker_that_dies_at_start_shows_the_end_of_its_log() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        kafka = EmbeddedKafka("kafka", port=port, start_timeout_ms=60_000)
        with pytest.raises(EmbeddedBrokerError) as raised:
            kafka.start()
    message = str(raised.value)
    assert f"Apache Kafka {kafka._broker.version} on 127.0.0.1:{port} exited" in message  # type: ignore[attr-defined]
    assert "Address already in use" in message, message
    assert not kafka.running() and kafka.log_file is None


def test_in_memory_brokers_cannot_keep_data_for_a_restart() -> None:
    with pytest.raises(EmbeddedBrokerError, match="tansu broker keeps its data in memory"):
        EmbeddedKafka("tansu").stop(keep_data=True)


def test_markers_carry_the_brokers_time_and_offsets_for_times_finds_them(
    kafka: KafkaCluster, make_config: MakeConfig
) -> None:
    """The markers topic is created with LogAppendTime (deadlines follow the broker's clock); on real Kafka the
    timestamp index then answers offsets_for_times (tansu answers it wrongly, so it is used nowhere in kmq)."""
    if kafka.backend != "kafka":
        pytest.skip(f"offsets_for_times is wrong on {kafka.backend}; this checks Apache Kafka")
    config = make_config(partitions=1)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, config.markers_topic)
    described = admin.describe_configs([resource])[resource].result(timeout=10)
    assert described["message.timestamp.type"].value == "LogAppendTime"
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    stale_client_time_ms = 1_000_000_000_000  # 2001: the broker replaces it with its own clock
    before_ms = int(time.time() * 1000)
    for offset in range(3):
        key, value = MarkerKey(0, offset).encode(), StartMarker(5000).encode()
        producer.produce(config.markers_topic, value, key, partition=0, timestamp=stale_client_time_ms)
        assert producer.flush(10) == 0
    records = read_topic(config, config.markers_topic, 1)
    assert all(r.timestamp_ms >= before_ms - 1000 for r in records), [r.timestamp_ms for r in records]
    consumer_settings = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"t-{uuid.uuid4().hex[:8]}"}
    consumer = Consumer(consumer_settings)
    try:
        found = consumer.offsets_for_times([TopicPartition(config.markers_topic, 0, records[1].timestamp_ms)], 10)
    finally:
        consumer.close()
    assert found[0].offset <= records[1].offset


def test_topics_are_usable_the_moment_ensure_topics_returns(kafka: KafkaCluster) -> None:
    """Kafka's controller answers CreateTopics before every broker's metadata has the topic; ensure_topics waits
    for it (a check right after creation once found the markers topic 'missing' and stopped `kmq demo`)."""
    for _ in range(5):
        config = kafka.config(f"t-fresh-{uuid.uuid4().hex[:8]}")
        ensure_topics(config, 4)
        assert check_topics(config) == 4
