"""Fixtures of the JVM kmq interoperability tests: the harness, and the broker they run on.

JVM kmq speaks the Kafka protocol through the Java client, so these tests run on real Apache Kafka wherever the
project can start it: the session `kafka` when it already is real Kafka (`KMQ_TEST_BACKEND=kafka`) or an external
cluster (`KMQ_BOOTSTRAP_SERVERS`), else an embedded Kafka of their own when the `kafka` backend exists, else the
session `kafka` (tansu), which the Java client also works with.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kmq.embedded import BACKENDS, EmbeddedKafka, KafkaCluster
from kmq.jvm import JvmKmq, missing_tools

_REAL_KAFKA = "kafka"


@pytest.fixture(scope="session")
def jvm_kmq() -> JvmKmq:
    problem = missing_tools()
    if problem:
        pytest.skip(problem)
    harness = JvmKmq()
    harness.classpath()  # resolved once per pom (Maven Central), then from the per-user cache
    return harness


@pytest.fixture(scope="session")
def interop_kafka(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    session_backend = os.environ.get("KMQ_TEST_BACKEND", "tansu")
    if os.environ.get("KMQ_BOOTSTRAP_SERVERS") or session_backend == _REAL_KAFKA or _REAL_KAFKA not in BACKENDS:
        yield request.getfixturevalue("kafka")
        return
    with EmbeddedKafka(_REAL_KAFKA) as real:
        yield real


@pytest.fixture
def cluster(interop_kafka: KafkaCluster) -> KafkaCluster:
    return interop_kafka
