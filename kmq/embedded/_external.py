"""`ExternalKafka`: a real cluster (e.g. `KMQ_BOOTSTRAP_SERVERS`) behind the same interface as `EmbeddedKafka`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kmq.admin import ensure_topics
from kmq.config import KmqConfig
from kmq.embedded._cluster import KafkaSettings, cluster_config
from kmq.embedded._topics import create_topics
from kmq.errors import ConfigError
from kmq.kafka import admin_settings
from kmq.settings import env_name, read_env

# The KmqConfig fields that say how to reach a cluster; everything else belongs to a queue.
CONNECTION_FIELDS = (
    "bootstrap_servers",
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "sasl_password_file",
    "ssl_ca_location",
    "kafka_config",
    "consumer_kafka_config",
)


class ExternalKafka:
    """A running cluster: `connection` holds KmqConfig's connection fields; topics are made through `kmq.admin`."""

    backend = "external"

    def __init__(self, connection: Mapping[str, Any], replication_factor: int = 1) -> None:
        unknown = sorted(set(connection) - set(CONNECTION_FIELDS))
        if unknown:
            raise ConfigError(unknown[0], f"not a connection setting (those are: {', '.join(CONNECTION_FIELDS)})")
        if replication_factor < 1:
            raise ConfigError("replication_factor", "must be at least 1")
        self._connection = dict(connection)
        self.replication_factor = replication_factor
        self._admin_config = self.config("kmq-admin")  # validates the settings now

    @classmethod
    def from_env(cls, replication_factor: int = 1) -> ExternalKafka:
        """The cluster that `KMQ_BOOTSTRAP_SERVERS` (required) and the other connection `KMQ_*` variables describe
        (`KMQ_KAFKA_CONFIG` and `KMQ_CONSUMER_KAFKA_CONFIG` as JSON objects)."""
        values = read_env(KmqConfig)
        if not values.get("bootstrap_servers"):
            raise ConfigError(env_name("bootstrap_servers"), "must be set to use an external cluster")
        return cls({k: v for k, v in values.items() if k in CONNECTION_FIELDS}, replication_factor)

    @property
    def bootstrap_servers(self) -> str:
        return self._admin_config.bootstrap_servers

    @property
    def kafka_config(self) -> KafkaSettings:
        return dict(self._admin_config.kafka_config)

    @property
    def consumer_kafka_config(self) -> KafkaSettings:
        return dict(self._admin_config.consumer_kafka_config)

    def create_topics(self, topics: Mapping[str, int], timeout_ms: int = 15_000) -> None:
        """Create topics with these partition counts (existing ones are kept) and wait until metadata shows them."""
        create_topics(admin_settings(self._admin_config), topics, self.replication_factor, timeout_ms)

    def ensure_topics(self, config: KmqConfig, partitions: int) -> None:
        ensure_topics(config, partitions, self.replication_factor)

    def config(self, queue_topic: str, **overrides: Any) -> KmqConfig:
        return cluster_config(self._connection, queue_topic, overrides)

    def __repr__(self) -> str:
        return f"ExternalKafka({self.bootstrap_servers})"
