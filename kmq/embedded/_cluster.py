"""`KafkaCluster`: what tests, examples and tools need from a cluster, embedded or external."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kmq.config import KafkaValue, KmqConfig

KafkaSettings = dict[str, KafkaValue]


class KafkaCluster(Protocol):
    """A cluster to run kmq on: `EmbeddedKafka` (tansu, mock) or `ExternalKafka` (KMQ_BOOTSTRAP_SERVERS)."""

    @property
    def backend(self) -> str: ...

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def kafka_config(self) -> KafkaSettings: ...

    @property
    def consumer_kafka_config(self) -> KafkaSettings: ...

    def create_topics(self, topics: Mapping[str, int]) -> None: ...

    def ensure_topics(self, config: KmqConfig, partitions: int) -> None: ...

    def config(self, queue_topic: str, **overrides: Any) -> KmqConfig: ...


def cluster_config(connection: Mapping[str, Any], queue_topic: str, overrides: Mapping[str, Any]) -> KmqConfig:
    """A KmqConfig for `queue_topic` on a cluster: its connection settings, then `overrides`.

    `kafka_config` and `consumer_kafka_config` given in `overrides` are merged into the cluster's recommended
    settings (an override of one key keeps the others), every other field replaces.
    """
    fields: dict[str, Any] = {**connection, "queue_topic": queue_topic, **overrides}
    for name in ("kafka_config", "consumer_kafka_config"):
        fields[name] = {**connection.get(name, {}), **overrides.get(name, {})}
    return KmqConfig(**fields)
