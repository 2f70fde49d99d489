"""Fixtures of the JVM kmq interoperability tests: the harness, and the broker they run on.

The Java client needs a full Kafka protocol peer, so these tests run on real Apache Kafka wherever the project can
start it: the session `kafka` when it already is real Kafka (`KMQ_TEST_BACKEND=kafka`) or an external cluster
(`KMQ_BOOTSTRAP_SERVERS`), else an embedded Kafka of their own once the `kafka` backend exists. Until then they run on
tansu (the session's, or their own when the session's is librdkafka's mock, which the Java client cannot use).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kmq.embedded import BACKENDS, EmbeddedKafka, KafkaCluster
from kmq.jvm import JvmKmq, missing_tools

PREFERRED_BACKEND = "kafka" if "kafka" in BACKENDS else "tansu"


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
    if os.environ.get("KMQ_BOOTSTRAP_SERVERS") or session_backend == PREFERRED_BACKEND:
        yield request.getfixturevalue("kafka")
        return
    with EmbeddedKafka(PREFERRED_BACKEND) as own:
        yield own


@pytest.fixture
def cluster(interop_kafka: KafkaCluster) -> KafkaCluster:
    return interop_kafka
