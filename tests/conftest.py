"""Shared fixtures: the Kafka cluster of the test session and unique topics on it.

- `kafka` (session): the cluster `KMQ_BOOTSTRAP_SERVERS` names (other connection settings from `KMQ_*`, e.g.
  `KMQ_KAFKA_CONFIG` as JSON; topics with `KMQ_TEST_REPLICATION_FACTOR` replicas, default 1), else an embedded broker
  of backend `KMQ_TEST_BACKEND` (tansu or mock; default tansu).
- `kafka_mock` (session): an embedded mock broker (the `kafka` one when that is a mock); skipped on an external cluster.
- `cluster`: the cluster `make_config` uses, `kafka` by default. A module runs on both embedded backends with::

      @pytest.fixture(params=["kafka", "kafka_mock"])
      def cluster(request: pytest.FixtureRequest) -> KafkaCluster:
          return request.getfixturevalue(request.param)

- `make_config(partitions=4, **overrides)`: a KmqConfig for a new queue `t-<test>-<uuid8>`, its queue, markers and
  dead-letter topics created on `cluster`.

Tests under tests/integration get the `integration` mark, so `-m "not integration"` runs without a broker.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kmq.config import KmqConfig
from kmq.embedded import EmbeddedKafka, ExternalKafka, KafkaCluster

INTEGRATION_DIR = Path(__file__).parent / "integration"
MakeConfig = Callable[..., KmqConfig]
_TOPIC_SLUG_CHARS = 80


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(INTEGRATION_DIR):
            item.add_marker(pytest.mark.integration)


def external_cluster_requested() -> bool:
    return bool(os.environ.get("KMQ_BOOTSTRAP_SERVERS"))


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaCluster]:
    if external_cluster_requested():
        yield ExternalKafka.from_env(replication_factor=int(os.environ.get("KMQ_TEST_REPLICATION_FACTOR", "1")))
        return
    with EmbeddedKafka(os.environ.get("KMQ_TEST_BACKEND", "tansu")) as embedded:
        yield embedded


@pytest.fixture(scope="session")
def kafka_mock(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    if external_cluster_requested():
        pytest.skip("KMQ_BOOTSTRAP_SERVERS is set: tests run on that cluster only, not on the embedded mock")
    if os.environ.get("KMQ_TEST_BACKEND") == "mock":
        yield request.getfixturevalue("kafka")
        return
    with EmbeddedKafka("mock") as embedded:
        yield embedded


@pytest.fixture
def cluster(kafka: KafkaCluster) -> KafkaCluster:
    return kafka


@pytest.fixture
def make_config(cluster: KafkaCluster, request: pytest.FixtureRequest) -> MakeConfig:
    def make(partitions: int = 4, **overrides: Any) -> KmqConfig:
        config = cluster.config(unique_topic(request.node.name), **overrides)
        cluster.ensure_topics(config, partitions)
        return config

    return make


def unique_topic(test_name: str) -> str:
    """`t-<test name, topic-safe>-<8 hex digits>`: unique per call, readable in the broker's topic list."""
    slug = re.sub(r"[^a-zA-Z0-9._-]+", "-", test_name).strip("-.")[:_TOPIC_SLUG_CHARS]
    return f"t-{slug}-{uuid.uuid4().hex[:8]}"
