"""The Kafka cluster of a demo run: the embedded broker, or a real cluster given by `--bootstrap-servers`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from kmq.config import KmqConfig
from kmq.embedded import EmbeddedKafka, ExternalKafka, KafkaCluster
from kmq.embedded._external import CONNECTION_FIELDS
from kmq.settings import read_env


@contextlib.contextmanager
def open_cluster(bootstrap_servers: str | None, backend: str) -> Iterator[KafkaCluster]:
    """The real cluster (other connection settings from `KMQ_*` variables) or a fresh embedded broker, stopped on
    exit."""
    if bootstrap_servers:
        connection = {k: v for k, v in read_env(KmqConfig).items() if k in CONNECTION_FIELDS}
        yield ExternalKafka({**connection, "bootstrap_servers": bootstrap_servers})
        return
    with EmbeddedKafka(backend=backend) as kafka:
        yield kafka


def describe(cluster: KafkaCluster) -> str:
    if cluster.backend == "external":
        return f"Kafka at {cluster.bootstrap_servers}"
    kind = cluster.describe() if isinstance(cluster, EmbeddedKafka) else cluster.backend
    return f"embedded {kind} broker at {cluster.bootstrap_servers}"


def queue_config(cluster: KafkaCluster, queue_topic: str, **fields: Any) -> KmqConfig:
    """The demo queue's config: topic and group names always derive from the queue, whatever KMQ_* variables say."""
    return cluster.config(queue_topic, markers_topic="", dead_letter_topic="", group_id="", **fields)


def create_topics(cluster: KafkaCluster, config: KmqConfig, partitions: int, results_topic: str) -> None:
    """The queue, markers and dead-letter topics, and the results topic the workers write to."""
    cluster.ensure_topics(config, partitions)
    cluster.create_topics({results_topic: partitions})
