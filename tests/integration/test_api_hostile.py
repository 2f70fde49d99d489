"""The REST facade under hostile input: non-finite numbers, replayed receipts (issue 15, items 9 and 10)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster
from tests.integration.test_api_endpoints import AUTH, PARTITIONS, api_config, url

# Python's json reads these as float nan / inf; the request must still be refused as invalid, naming the field.
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400"]
ROUTE_FIELDS = [
    ("receive", '{"max_messages": %s}', ["body", "max_messages"]),
    ("receive", '{"wait_ms": %s}', ["body", "wait_ms"]),
    ("receive", '{"visibility_timeout_ms": %s}', ["body", "visibility_timeout_ms"]),
    ("receive", '{"surprise": %s}', ["body", "surprise"]),
    ("messages", '{"messages": [{"value": %s}]}', ["body", "messages", 0, "value"]),
    ("messages", '{"messages": %s}', ["body", "messages"]),
    ("ack", '{"receipts": [%s]}', ["body", "receipts", 0]),
    ("nack", '{"receipts": ["r"], "delay_ms": %s}', ["body", "delay_ms"]),
    ("extend", '{"receipts": ["r"], "visibility_timeout_ms": %s}', ["body", "visibility_timeout_ms"]),
]


@pytest.fixture(scope="module")
def shared(kafka: KafkaCluster) -> Iterator[tuple[TestClient, KmqConfig]]:
    queue = kafka.config(f"t-api-hostile-{time.monotonic_ns()}")
    kafka.ensure_topics(queue, PARTITIONS)
    with TestClient(create_app(api_config(queue)), headers=AUTH) as client:
        yield client, queue


@pytest.mark.parametrize("number", NON_FINITE)
@pytest.mark.parametrize(("action", "template", "field"), ROUTE_FIELDS)
def test_a_non_finite_number_is_422_naming_the_field(
    shared: tuple[TestClient, KmqConfig], action: str, template: str, field: list[Any], number: str
) -> None:
    client, queue = shared
    body = (template % number).encode()
    response = client.post(url(queue, action), content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert field in [error["loc"] for error in response.json()["detail"]]
