"""Shared fixtures: the Kafka cluster of the test session and unique topics on it.

- `kafka` (session): the cluster `KMQ_BOOTSTRAP_SERVERS` names (other connection settings from `KMQ_*`, e.g.
  `KMQ_KAFKA_CONFIG` as JSON; topics with `KMQ_TEST_REPLICATION_FACTOR` replicas, default 1), else an embedded broker
  of backend `KMQ_TEST_BACKEND` (kafka, tansu or mock; default: kafka where Java 17+ and mvn are installed, else
  tansu). `scripts/test` sets kafka: the integration tier runs on Apache Kafka.
- `kafka_tansu`, `kafka_mock` (session): an embedded tansu / mock broker (the `kafka` one when that is the backend);
  skipped on an external cluster. They carry the smoke set that keeps the stand-ins working.
- `kafka_nodes` (session): a 3-node embedded Apache Kafka, only for the tests that ask for it (kafka backend).
- `secure_kafka` (session): an embedded Apache Kafka with a SASL_SSL listener and ACLs, likewise.
- `cluster`: the cluster `make_config` uses, `kafka` by default. A module runs on the stand-ins too with::

      @pytest.fixture(params=["kafka", "kafka_tansu", "kafka_mock"])
      def cluster(request: pytest.FixtureRequest) -> KafkaCluster:
          return request.getfixturevalue(request.param)

- `make_config(partitions=4, **overrides)`: a KmqConfig for a new queue `t-<test>-<uuid8>`, its queue, markers and
  dead-letter topics created on `cluster`.

Tests that start a broker, a container, a cluster or a fresh virtualenv get the `integration` mark (by their folder or
their fixtures), so `-m "not integration"` starts none. `@pytest.mark.needs(available, reason)`: what a test needs of
the machine; without it the test fails, unless the caller opts in to skipping with KMQ_ALLOW_SKIPS=1.
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
from kmq.embedded import EmbeddedKafka, ExternalKafka, KafkaCluster, default_backend
from tests.helpers import needs
from tests.secure_kafka import start_secure_kafka

TESTS = Path(__file__).parent
# Their tests start brokers, containers, clusters or virtualenvs (tests/deploy: kubectl and the image's containers).
INTEGRATION_DIRS = tuple(TESTS / name for name in ("integration", "faults", "interop", "deploy", "k8s", "install"))
BROKER_FIXTURES = frozenset({"kafka", "kafka_tansu", "kafka_mock", "kafka_nodes", "secure_kafka", "make_config"})
MakeConfig = Callable[..., KmqConfig]
_TOPIC_SLUG_CHARS = 80


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(available, reason): fails without what the machine lacks, unless KMQ_ALLOW_SKIPS=1"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if any(item.path.is_relative_to(folder) for folder in INTEGRATION_DIRS) or fixtures & BROKER_FIXTURES:
            item.add_marker(pytest.mark.integration)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs"):
        needs(*mark.args)


def external_cluster_requested() -> bool:
    return bool(os.environ.get("KMQ_BOOTSTRAP_SERVERS"))


def backend_under_test() -> str:
    return os.environ.get("KMQ_TEST_BACKEND") or default_backend()


def pytest_report_header() -> str:
    if external_cluster_requested():
        return f"kmq: broker tests on the external cluster {os.environ['KMQ_BOOTSTRAP_SERVERS']}"
    return f"kmq: broker tests on an embedded {backend_under_test()} broker (KMQ_TEST_BACKEND)"


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaCluster]:
    if external_cluster_requested():
        yield ExternalKafka.from_env(replication_factor=int(os.environ.get("KMQ_TEST_REPLICATION_FACTOR", "1")))
        return
    with EmbeddedKafka(backend_under_test()) as embedded:
        yield embedded


def _stand_in(backend: str, request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    if external_cluster_requested():
        pytest.skip(f"KMQ_BOOTSTRAP_SERVERS is set: tests run on that cluster only, not on an embedded {backend}")
    if backend_under_test() == backend:
        yield request.getfixturevalue("kafka")
        return
    with EmbeddedKafka(backend) as embedded:
        yield embedded


@pytest.fixture(scope="session")
def kafka_tansu(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    yield from _stand_in("tansu", request)


@pytest.fixture(scope="session")
def kafka_mock(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    yield from _stand_in("mock", request)


@pytest.fixture(scope="session")
def kafka_nodes() -> Iterator[EmbeddedKafka]:
    """A 3-node Apache Kafka cluster (RF 3, min ISR 2), started once per session by the tests that ask for it.

    Its nodes can be killed, paused and restarted (`.nodes`): a test that does so restarts them before it ends.
    Skipped on an external cluster and off the kafka backend (only Apache Kafka runs several nodes here)."""
    if external_cluster_requested() or backend_under_test() != "kafka":
        pytest.skip("a 3-node cluster needs the embedded kafka backend (KMQ_TEST_BACKEND=kafka)")
    with EmbeddedKafka("kafka", nodes=3) as embedded:
        yield embedded


@pytest.fixture(scope="session")
def secure_kafka() -> Iterator[EmbeddedKafka]:
    """A one-node Apache Kafka with a SASL_SSL listener (SCRAM-SHA-512, TLS from a throwaway CA, ACLs enforced) and
    the users of tests/secure_kafka.py, started once per session by the tests that ask for it (kafka backend)."""
    if external_cluster_requested() or backend_under_test() != "kafka":
        pytest.skip("the SASL_SSL listener is the embedded kafka backend's (KMQ_TEST_BACKEND=kafka)")
    kafka = start_secure_kafka()
    try:
        yield kafka
    finally:
        kafka.stop()


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
