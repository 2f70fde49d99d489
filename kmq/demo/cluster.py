"""The Kafka cluster of a demo run: the embedded broker, or a real cluster given by `--bootstrap-servers`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kmq._kafka import admin_settings, unavailable
from kmq.admin import ensure_topics
from kmq.config import KmqConfig

if TYPE_CHECKING:
    from kmq.embedded import EmbeddedKafka

CREATE_TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True)
class Cluster:
    """Where the demo runs; `embedded` is None on a real cluster."""

    description: str
    base: KmqConfig | None
    embedded: EmbeddedKafka | None

    def config(self, queue_topic: str, **fields: Any) -> KmqConfig:
        # Topic and group names always derive from the queue, whatever KMQ_* variables say.
        derived = {"markers_topic": "", "dead_letter_topic": "", "group_id": ""}
        if self.embedded is not None:
            return self.embedded.config(queue_topic, **derived, **fields)
        assert self.base is not None
        return self.base.with_overrides(queue_topic=queue_topic, **derived, **fields)

    def create_topics(self, config: KmqConfig, partitions: int, results_topic: str) -> None:
        """The queue, markers and dead-letter topics, and the results topic the workers write to."""
        if self.embedded is not None:
            self.embedded.ensure_topics(config, partitions)
            self.embedded.create_topics({results_topic: partitions})
            return
        ensure_topics(config, partitions)
        admin = AdminClient(admin_settings(config))
        future = admin.create_topics([NewTopic(results_topic, partitions, 1)], operation_timeout=CREATE_TIMEOUT_S)
        try:
            future[results_topic].result(timeout=CREATE_TIMEOUT_S)
        except KafkaException as e:
            raise unavailable(config, e) from e


@contextlib.contextmanager
def open_cluster(bootstrap_servers: str | None, backend: str) -> Iterator[Cluster]:
    """The real cluster (settings from `KMQ_*` variables) or a fresh embedded broker, stopped on exit."""
    if bootstrap_servers:
        base = KmqConfig.from_env(bootstrap_servers=bootstrap_servers, queue_topic="kmq-demo")
        yield Cluster(f"Kafka at {bootstrap_servers}", base, None)
        return
    from kmq.embedded import EmbeddedKafka  # only here: a real cluster needs no embedded broker

    with EmbeddedKafka(backend=backend) as kafka:
        yield Cluster(f"embedded {backend} broker at {kafka.bootstrap_servers}", None, kafka)
