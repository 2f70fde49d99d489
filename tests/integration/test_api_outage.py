"""When Kafka is gone the API answers 503 with the reason (never a 500); it refuses to start on broken topics."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from fastapi.testclient import TestClient
from pydantic import SecretStr

from kmq.config import KmqConfig
from kmq.embedded import EmbeddedKafka, KafkaCluster
from kmq.errors import TopicMismatchError, TopicMissingError
from kmq.markers import MarkerKey, StartMarker
from kmq_api import delivery as api_delivery
from kmq_api.app import create_app
from kmq_api.config import ApiConfig
from tests.conftest import backend_under_test
from tests.helpers import read_topic, wait_for

AUTH = {"Authorization": "Bearer outage-key"}


def api_config(queue: KmqConfig, **changes: Any) -> ApiConfig:
    secret = "outage-test-secret-0123456789abcdef"
    return ApiConfig(queues=(queue,), receipt_secret=secret, api_keys=(SecretStr("outage-key"),), **changes)


@pytest.fixture
def own_broker() -> Iterator[EmbeddedKafka]:
    """A broker of this test's own, to stop under the running API (the session's broker serves the others)."""
    broker = EmbeddedKafka(backend_under_test()).start()
    try:
        yield broker
    finally:
        broker.stop()


def test_an_unreachable_broker_is_a_503_naming_kafka(own_broker: EmbeddedKafka) -> None:
    queue = own_broker.config(f"t-api-outage-{uuid.uuid4().hex[:8]}")
    own_broker.ensure_topics(queue, 2)
    path = f"/v1/queues/{queue.queue_topic}"
    with TestClient(create_app(api_config(queue, write_timeout_ms=1000)), headers=AUTH) as http:
        # Set-up: the first write also waits for the producer's id and metadata, which a loaded machine can make
        # longer than this test's 1 s write timeout: retry until the broker has it.
        before = {"messages": [{"value": "before"}]}
        wait_for(lambda: http.post(f"{path}/messages", json=before).status_code == 200, what="a first send")
        receipt = http.post(f"{path}/receive", json={"wait_ms": 10_000}).json()["messages"][0]["receipt"]
        errors_before = _broker_errors(http, queue.queue_topic)
        own_broker.stop()
        answers = {
            "send": http.post(f"{path}/messages", json={"messages": [{"value": "during"}]}),
            "ack": http.post(f"{path}/ack", json={"receipts": [receipt]}),
            "queue": http.get(path),
            "readyz": http.get("/readyz"),
        }
        for name, answer in answers.items():
            assert answer.status_code == 503, (name, answer.text)
            assert "Kafka" in answer.text or "Kafka" in str(answer.json().get("detail")), name
        assert http.get("/healthz").status_code == 200
        assert http.post(f"{path}/receive", json={"wait_ms": 0}).status_code in (200, 503)
        assert _broker_errors(http, queue.queue_topic) == errors_before + 3  # send, ack, queue


def _broker_errors(http: TestClient, topic: str) -> float:
    prefix = f'kmq_api_broker_errors_total{{topic="{topic}"}} '
    lines = [line for line in http.get("/metrics").text.splitlines() if line.startswith(prefix)]
    return float(lines[0].removeprefix(prefix)) if lines else 0.0


def test_the_api_refuses_to_start_without_its_topics(kafka: KafkaCluster) -> None:
    queue = kafka.config(f"t-api-missing-{uuid.uuid4().hex[:8]}")
    with pytest.raises(TopicMissingError, match=queue.queue_topic), TestClient(create_app(api_config(queue))):
        pass


def test_the_api_refuses_to_start_when_markers_and_queue_differ(kafka: KafkaCluster) -> None:
    queue = kafka.config(f"t-api-mismatch-{uuid.uuid4().hex[:8]}")
    kafka.create_topics({queue.queue_topic: 2, queue.markers_topic: 1, queue.dead_letter_topic: 1})
    with pytest.raises(TopicMismatchError, match="2"), TestClient(create_app(api_config(queue))):
        pass


def test_a_fatal_producer_error_makes_the_replica_unhealthy_and_writes_nothing(
    make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given an API whose idempotent producer hit a fatal error (librdkafka reports it once, to error_cb)
    error_callbacks: list[Callable[[KafkaError], None]] = []

    def recording_producer(settings: dict[str, Any]) -> Producer:
        error_callbacks.append(settings["error_cb"])
        return Producer(settings)

    monkeypatch.setattr(api_delivery, "Producer", recording_producer)
    queue: KmqConfig = make_config(partitions=1, marker_format="kmq")  # its START is read back below
    path = f"/v1/queues/{queue.queue_topic}"
    with TestClient(create_app(api_config(queue)), headers=AUTH) as http:
        assert http.post(f"{path}/messages", json={"messages": [{"value": "m"}]}).status_code == 200
        [message] = http.post(f"{path}/receive", json={"wait_ms": 10_000}).json()["messages"]
        for callback in error_callbacks:
            callback(KafkaError(KafkaError._FATAL, "out of order sequence", fatal=True))
        # then it can never write again: writes are 503 (retry elsewhere), not per-receipt failures, and the
        # probes fail so the replica is taken out of service and restarted
        ack = http.post(f"{path}/ack", json={"receipts": [message["receipt"]]})
        assert ack.status_code == 503, ack.text
        assert "out of order sequence" in ack.json()["detail"]
        assert http.post(f"{path}/messages", json={"messages": [{"value": "n"}]}).status_code == 503
        assert http.get("/healthz").status_code == 503
        assert http.get("/readyz").status_code == 503
    key = MarkerKey(message["partition"], message["offset"]).encode()
    assert [r.value for r in read_topic(queue, queue.markers_topic, 1) if r.key == key] == [
        StartMarker(queue.msg_timeout_ms).encode()
    ]
