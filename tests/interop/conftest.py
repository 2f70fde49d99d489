"""Fixtures of the JVM kmq interoperability tests: the harness, and the broker they run on.

The Java client needs a full Kafka protocol peer, so these tests run on real Apache Kafka: the session `kafka` when it
is real Kafka (`KMQ_TEST_BACKEND=kafka`, the default where Java and mvn are installed) or an external cluster
(`KMQ_BOOTSTRAP_SERVERS`), else an embedded Apache Kafka of their own (the session's broker is a stand-in).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from kmq.config import KmqConfig
from kmq.embedded import EmbeddedKafka, KafkaCluster
from kmq.jvm import JvmKmq, missing_tools
from tests.conftest import backend_under_test
from tests.helpers import unavailable
from tests.integration.marker_formats import with_marker_format

REAL_KAFKA = "kafka"
MakeConfig = Callable[..., KmqConfig]


@pytest.fixture(scope="session")
def jvm_kmq() -> JvmKmq:
    problem = missing_tools()
    if problem:
        unavailable(problem)
    harness = JvmKmq()
    harness.classpath()  # resolved once per pom (Maven Central), then from the per-user cache
    return harness


@pytest.fixture(scope="session")
def interop_kafka(jvm_kmq: JvmKmq, request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    """Needs `jvm_kmq`: without Java and mvn the tests skip before any broker is started."""
    session: KafkaCluster | None = None
    if os.environ.get("KMQ_BOOTSTRAP_SERVERS") or backend_under_test() == REAL_KAFKA:
        session = request.getfixturevalue("kafka")
    if session is not None:
        yield session
        return
    with EmbeddedKafka(REAL_KAFKA) as own:
        yield own


@pytest.fixture
def cluster(interop_kafka: KafkaCluster) -> KafkaCluster:
    return interop_kafka


@pytest.fixture
def make_config(make_config: MakeConfig) -> MakeConfig:
    """JVM kmq reads kmq markers only: every config here writes them, whatever the default format (the tests that
    need a BATCH START write it by hand)."""
    return with_marker_format(make_config, "kmq")
