"""Durations past the markers topic's retention are refused (issue 15, item 6): the START would be deleted before
it is due and the message lost."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from fastapi.testclient import TestClient

from kmq import retention
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.errors import DurationTooLongError
from kmq.markers import MarkerKey
from kmq.retention import RetentionLimit
from kmq_api.app import create_app
from tests.helpers import read_topic
from tests.integration.test_api_endpoints import AUTH, api_config, url

RETENTION_MS = 120_000


@pytest.fixture
def short_lived(kafka: Any) -> KmqConfig:
    """A queue whose markers topic keeps records for two minutes."""
    if kafka.backend == "mock":
        pytest.skip("librdkafka's mock cluster does not answer DescribeConfigs")
    config: KmqConfig = kafka.config(f"t-retention-{uuid.uuid4().hex[:8]}")
    admin = AdminClient(config.kafka_settings())
    topics = [
        NewTopic(config.queue_topic, 2, 1),
        NewTopic(config.markers_topic, 2, 1, config={"retention.ms": str(RETENTION_MS)}),
        NewTopic(config.dead_letter_topic, 1, 1),
    ]
    for future in admin.create_topics(topics).values():
        future.result(timeout=15)
    kafka.ensure_topics(config, 2)  # waits until every topic is visible
    return config


@pytest.fixture
def client(short_lived: KmqConfig) -> Iterator[KmqClient]:
    with KmqClient(short_lived) as client:
        yield client


def test_extend_and_nack_past_the_retention_are_refused_and_write_nothing(
    client: KmqClient, short_lived: KmqConfig
) -> None:
    key = MarkerKey(0, 0)
    with pytest.raises(DurationTooLongError, match=rf"extend timeout_ms=120000 .*retention.ms={RETENTION_MS}"):
        client.extend(key, RETENTION_MS)
    with pytest.raises(DurationTooLongError, match=r"nack delay_ms=3600000 .*raise retention.ms"):
        client.nack(key, 3_600_000)
    with pytest.raises(DurationTooLongError, match="msg_timeout_ms=120000"):
        client.receive(timeout_s=0.1, msg_timeout_ms=RETENTION_MS)
    client.extend(key, RETENTION_MS - 1)  # shorter than the retention: written
    client.flush()
    assert [r.key for r in read_topic(short_lived, short_lived.markers_topic, 2)] == [key.encode()]


def test_the_facade_refuses_them_as_invalid_fields(short_lived: KmqConfig) -> None:
    with TestClient(create_app(api_config(short_lived)), headers=AUTH) as http:
        for action, body, field in (
            ("nack", {"receipts": ["r"], "delay_ms": RETENTION_MS}, "delay_ms"),
            ("extend", {"receipts": ["r"], "visibility_timeout_ms": RETENTION_MS}, "visibility_timeout_ms"),
            ("receive", {"visibility_timeout_ms": RETENTION_MS}, "visibility_timeout_ms"),
        ):
            response = http.post(url(short_lived, action), json=body)
            assert response.status_code == 422, response.text
            [problem] = response.json()["detail"]
            assert problem["loc"] == ["body", field] and "retention.ms=120000" in problem["msg"]
    assert read_topic(short_lived, short_lived.markers_topic, 2) == []


def test_the_retention_is_read_once_and_only_for_long_durations(short_lived: KmqConfig, monkeypatch: Any) -> None:
    reads: list[str] = []
    real = retention._read_retention_ms

    def counted(config: KmqConfig) -> int | None:
        reads.append("read")
        return real(config)

    monkeypatch.setattr(retention, "_read_retention_ms", counted)
    limit = RetentionLimit(short_lived)
    limit.check(retention.UNCHECKED_BELOW_MS - 1, "short")
    assert reads == []
    for _ in range(3):
        limit.check(RETENTION_MS - 1, "long")
    assert (reads, limit.retention_ms()) == (["read"], RETENTION_MS)
