"""Schemathesis over the REST facade's OpenAPI schema, against a real broker: no 5xx, no answer outside the schema.

The examples are bounded and derandomized (the same requests every run), so the test is repeatable and quick.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, settings
from pydantic import SecretStr
from schemathesis import GenerationMode
from schemathesis.schemas import BaseSchema

from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster
from kmq_api.app import create_app
from kmq_api.config import ApiConfig
from tests.helpers import wait_for

KEY = "schema-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
# Long polls are real waits: keep the generated ones short (the schema's bound, 20 s, is tested elsewhere).
MAX_WAIT_MS = 50


@pytest.fixture(scope="module")
def served(kafka: KafkaCluster) -> Iterator[tuple[str, str]]:
    """The API under uvicorn on a loopback port (its lifespan runs as in production); its base URL and queue."""
    queue = kafka.config(f"t-api-schema-{uuid.uuid4().hex[:8]}")
    kafka.ensure_topics(queue, 2)
    secret = "schema-test-secret-0123456789abcdef"
    app = create_app(ApiConfig(queues=(queue,), receipt_secret=secret, api_keys=(SecretStr(KEY),)))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, name="api-under-test", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), what="uvicorn to start")
        assert server.started, "uvicorn did not start (see the log above)"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}", queue.queue_topic
    finally:
        server.should_exit = True
        thread.join(30)


def _schema() -> BaseSchema:
    """The schema is the same whatever the configuration: take it from an app that is never started."""
    queue = KmqConfig(bootstrap_servers="unused:9092", queue_topic="unused")
    config = ApiConfig(queues=(queue,), receipt_secret="x" * 32, allow_anonymous=True)
    loaded = schemathesis.openapi.from_dict(create_app(config).openapi())
    # Valid requests must succeed and invalid ones be refused with a documented 4xx.
    loaded.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
    return loaded


schema = _schema()


@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_every_answer_fits_the_schema_and_none_is_a_5xx(case: Any, served: tuple[str, str]) -> None:
    base_url, queue = served
    if case.path_parameters and "queue" in case.path_parameters:
        case.path_parameters["queue"] = queue  # the served queue: unknown ones only ever get the 404
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("wait_ms"), int) and 0 <= body["wait_ms"] <= 20_000:
        body["wait_ms"] = min(body["wait_ms"], MAX_WAIT_MS)
    case.call_and_validate(base_url=base_url, headers=AUTH)


# Python's json reads NaN, Infinity and 1e400 as floats: a client may send them, in any field of any route.
NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e400")
# (route, field, number) sent so far: every field of every route gets each of the four numbers, once, in the first
# generated body that has the field. (Sending one number per field of every generated body repeated the same checks
# ~1 000 times, a third of this module's time, and left most fields without three of the numbers.)
_SENT: set[tuple[str, str, str]] = set()


@schema.parametrize()
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_a_non_finite_number_in_any_field_is_a_422_naming_it(case: Any, served: tuple[str, str]) -> None:
    base_url, queue = served
    if not isinstance(case.body, dict) or not case.path_parameters:
        return  # no JSON object body (GET routes): nothing to put a number in
    case.path_parameters["queue"] = queue
    for field in sorted(case.body) or ["max_messages"]:
        for number in NON_FINITE:
            if (case.operation.label, field, number) in _SENT:
                continue
            _SENT.add((case.operation.label, field, number))
            _send_non_finite(case, base_url, field, number)


def _send_non_finite(case: Any, base_url: str, field: str, number: str) -> None:
    raw = json.dumps({**case.body, field: 0.5}).replace("0.5", number, 1) if case.body else f'{{"{field}": {number}}}'
    target = case.as_transport_kwargs(base_url=base_url)["url"]
    headers = {**AUTH, "Content-Type": "application/json"}
    response = httpx.post(target, content=raw.encode(), headers=headers, timeout=30)
    assert response.status_code == 422, (raw, response.text)
    assert ["body", field] in [error["loc"][:2] for error in response.json()["detail"]], response.text
    assert "422" in case.operation.definition.raw["responses"]  # a documented answer
