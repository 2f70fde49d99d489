"""The `kmq` command line against a real broker, as a user runs it: a process, its output and its exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster
from tests.conftest import unique_topic
from tests.helpers import read_topic
from tests.integration.marker_formats import marked_offsets


def kmq(cluster: KafkaCluster, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        "KMQ_BOOTSTRAP_SERVERS": cluster.bootstrap_servers,
        "KMQ_KAFKA_CONFIG": json.dumps(cluster.kafka_config),
        "KMQ_CONSUMER_KAFKA_CONFIG": json.dumps(cluster.consumer_kafka_config),
        "PATH": "/usr/bin:/bin",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "kmq", *args], input=stdin, capture_output=True, text=True, env=environment, timeout=120
    )


def values(config: KmqConfig, partitions: int) -> list[bytes | None]:
    return sorted(r.value for r in read_topic(config, config.queue_topic, partitions))


def test_topics_send_and_consume(kafka: KafkaCluster) -> None:
    queue = unique_topic("cli")
    config = kafka.config(queue)
    created = kmq(kafka, "topics", "create", "-q", queue, "-p", "3")
    assert created.returncode == 0, created.stderr
    assert f"{queue}__markers (3 partitions each)" in created.stdout
    assert kmq(kafka, "topics", "check", "-q", queue).returncode == 0
    assert kmq(kafka, "send", "-q", queue, "--count", "20").returncode == 0
    assert kmq(kafka, "send", "-q", queue, "-H", "origin=cli", stdin="alpha\nbeta\n").returncode == 0
    assert len(values(config, 3)) == 22
    consumed = kmq(kafka, "consume", "-q", queue, "--max", "22", "--idle-exit", "10")
    assert consumed.returncode == 0, consumed.stderr
    assert "received 22 messages, acknowledged 22" in consumed.stderr
    assert " alpha" in consumed.stdout and " message-19" in consumed.stdout


def test_drop_rate_leaves_messages_unacknowledged(kafka: KafkaCluster) -> None:
    queue = unique_topic("cli-drop")
    config = kafka.config(queue)
    kafka.ensure_topics(config, 1)
    assert kmq(kafka, "send", "-q", queue, "--count", "10").returncode == 0
    consumed = kmq(kafka, "consume", "-q", queue, "--max", "10", "--drop-rate", "1", "--idle-exit", "10")
    assert "acknowledged 0" in consumed.stderr
    assert consumed.stdout.count("left unacknowledged") == 10
    started, ended = marked_offsets(read_topic(config, config.markers_topic, 1))
    assert (started, ended) == ({(0, offset) for offset in range(10)}, set())


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_errors_are_one_line_naming_the_problem(kafka: KafkaCluster) -> None:
    queue = unique_topic("cli-errors")
    assert_one_line_error(kmq(kafka, "topics", "check", "-q", queue), queue, "does not exist")
    assert_one_line_error(kmq(kafka, "send", "-q", queue, "-H", "novalue", "x"), "NAME=VALUE")
    assert_one_line_error(kmq(kafka, "send", "-q", queue, "x", KMQ_MSG_TIMEOUT_MS="soon"), "KMQ_MSG_TIMEOUT_MS")
    assert_one_line_error(kmq(kafka, "send", "x", KMQ_QUEUE_TOPIC=""), "queue_topic")


def test_misaligned_topics_are_refused_naming_both_counts(kafka: KafkaCluster) -> None:
    config = kafka.config(unique_topic("cli-misaligned"))
    kafka.create_topics({config.queue_topic: 2, config.markers_topic: 1, config.dead_letter_topic: 1})
    result = kmq(kafka, "topics", "check", "-q", config.queue_topic)
    assert_one_line_error(result, "has 1 partitions", "has 2")


def test_api_refuses_a_queue_without_topics_in_one_line(kafka: KafkaCluster) -> None:
    queue = unique_topic("cli-api")
    settings = {"KMQ_API_QUEUES": queue, "KMQ_API_KEYS": "k", "KMQ_API_RECEIPT_SECRET": "s" * 32}
    assert_one_line_error(kmq(kafka, "api", "--port", "1", **settings), queue, "does not exist")


def test_an_unreachable_cluster_is_named(kafka: KafkaCluster) -> None:
    result = kmq(kafka, "send", "-q", "jobs", "x", KMQ_BOOTSTRAP_SERVERS="127.0.0.1:1", KMQ_METADATA_TIMEOUT_MS="1000")
    assert_one_line_error(result, "cannot reach Kafka at 127.0.0.1:1")


def test_help_lists_every_command(kafka: Any) -> None:
    result = kmq(kafka, "--help")
    assert result.returncode == 0
    for command in ("broker", "topics", "send", "consume", "tracker", "api", "demo", "bench", "worker", "dlq"):
        assert command in result.stdout
