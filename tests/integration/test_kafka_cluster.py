"""A 3-node Apache Kafka: kmq's topics get three replicas and min ISR 2, `kmq topics check` warns about weaker ones,
and a node killed and restarted on its data rejoins."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from kmq.admin import ensure_topics, replication
from kmq.embedded import EmbeddedKafka
from kmq.errors import ConfigError
from kmq.kafka import admin_settings
from tests.conftest import unique_topic
from tests.helpers import read_topic
from tests.integration.test_cli import kmq


def test_topics_on_three_nodes_have_three_replicas_and_min_isr_2(kafka_nodes: EmbeddedKafka) -> None:
    config = kafka_nodes.config(unique_topic("replicated"))
    kafka_nodes.ensure_topics(config, 3)
    topics = replication(config)
    assert [(t.topic, t.brokers, t.replication_factor, t.min_insync_replicas) for t in topics] == [
        (topic, 3, 3, 2) for topic in (config.queue_topic, config.markers_topic, config.dead_letter_topic)
    ]
    assert [t.warning() for t in topics] == [None, None, None]
    checked = kmq(kafka_nodes, "topics", "check", "-q", config.queue_topic)
    assert checked.returncode == 0 and "warning" not in checked.stderr, checked.stderr
    assert f"ok: {config.markers_topic} has 3 replicas, min.insync.replicas=2" in checked.stdout


def test_markers_follow_the_queue_and_check_warns_about_one_replica(kafka_nodes: EmbeddedKafka) -> None:
    queue = unique_topic("one-replica")
    kafka_nodes.create_topics({queue: 2})  # the queue exists already with 3 replicas
    created = kmq(kafka_nodes, "topics", "create", "-q", queue, "-p", "2", "--replication-factor", "1")
    assert created.returncode == 0, created.stderr
    config = kafka_nodes.config(queue)
    assert {t.topic: t.replication_factor for t in replication(config)}[config.markers_topic] == 3
    weak = unique_topic("weak")
    assert kmq(kafka_nodes, "topics", "create", "-q", weak, "-p", "1", "--replication-factor", "1").returncode == 0
    checked = kmq(kafka_nodes, "topics", "check", "-q", weak)
    assert checked.returncode == 0, checked.stderr
    assert f"warning: {weak}__markers has 1 replica on a 3-broker cluster" in checked.stderr
    assert "--replication-factor 3" in checked.stderr


def test_more_replicas_than_brokers_is_refused_with_the_reason(kafka_nodes: EmbeddedKafka) -> None:
    config = kafka_nodes.config(unique_topic("too-many"))
    with pytest.raises(ConfigError, match="4 replicas need as many brokers; there are 3"):
        ensure_topics(config, 1, replication_factor=4)


def test_a_killed_node_restarts_on_its_data_and_rejoins(kafka_nodes: EmbeddedKafka) -> None:
    config = kafka_nodes.config(unique_topic("node-kill"))
    kafka_nodes.ensure_topics(config, 1)
    producer = Producer({**admin_settings(config), "acks": "all"})
    nodes = kafka_nodes.nodes
    first_pid = nodes.pid(2)
    nodes.kill(2)
    assert not nodes.running(2) and nodes.pid(2) is None
    producer.produce(config.queue_topic, b"while node 2 is down")  # 2 replicas of 3 in sync: min ISR 2 holds
    assert producer.flush(30) == 0
    nodes.start(2)
    assert nodes.running(2) and nodes.pid(2) != first_pid
    assert [r.value for r in read_topic(config, config.queue_topic, 1)] == [b"while node 2 is down"]
