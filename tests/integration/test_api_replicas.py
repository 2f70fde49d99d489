"""Several API replicas over one queue: receipts travel between them, and the tracker redelivers what nobody acks."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from kmq.batch_markers import BatchEnd
from kmq.config import KmqConfig
from kmq.markers import MarkerKey
from kmq_api.app import create_app
from kmq_api.config import ApiConfig
from kmq_tracker.config import TrackerConfig
from kmq_tracker.service import TrackerService
from tests.helpers import read_topic, wait_for

SECRET = "a-secret-every-replica-shares-0123"
AUTH = {"Authorization": "Bearer replica-key"}
MakeConfig = Callable[..., KmqConfig]


def replica(queue: KmqConfig, secret: str = SECRET, **changes: Any) -> TestClient:
    config = ApiConfig(queues=(queue,), receipt_secret=secret, api_keys=(SecretStr("replica-key"),), **changes)
    return TestClient(create_app(config), headers=AUTH)


def receive(client: TestClient, queue: KmqConfig, count: int, timeout_s: float = 30.0, **body: Any) -> list[Any]:
    received: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(received) < count:
        assert time.monotonic() < deadline, f"received {len(received)} of {count} in {timeout_s}s"
        request = {"max_messages": count - len(received), "wait_ms": 1000, **body}
        response = client.post(f"/v1/queues/{queue.queue_topic}/receive", json=request)
        assert response.status_code == 200, response.text
        received += response.json()["messages"]
    return received


def statuses(client: TestClient, queue: KmqConfig, action: str, receipts: list[str], **body: Any) -> list[str]:
    response = client.post(f"/v1/queues/{queue.queue_topic}/{action}", json={"receipts": receipts, **body})
    assert response.status_code == 200, response.text
    return [result["status"] for result in response.json()["results"]]


@pytest.fixture
def queue(make_config: MakeConfig) -> KmqConfig:
    return make_config(partitions=2)


def test_a_receipt_issued_by_one_replica_is_acked_through_another(queue: KmqConfig) -> None:
    with replica(queue) as first, replica(queue) as second, replica(queue, secret="x" * 32) as stranger:
        response = first.post(f"/v1/queues/{queue.queue_topic}/messages", json={"messages": [{"value": "hop"}]})
        assert response.status_code == 200
        [message] = receive(first, queue, 1)
        assert statuses(stranger, queue, "ack", [message["receipt"]]) == ["invalid"]
        assert statuses(second, queue, "ack", [message["receipt"]]) == ["ok"]
    # one END for it, written by the second replica: a BATCH END of its one offset (batch markers, the default)
    key = MarkerKey(message["partition"], message["offset"]).encode()
    markers = [r.value for r in read_topic(queue, queue.markers_topic, 2) if r.key == key]
    assert markers[-1] == BatchEnd(((message["offset"], 1),)).encode()
    assert markers.count(markers[-1]) == 1


def test_a_replica_without_receivers_leaves_the_group_to_the_others(
    queue: KmqConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kmq_api.served")
    left = f"leaving group {queue.group_id}"
    with replica(queue, receiver_idle_ms=300) as idle, replica(queue) as busy:
        idle.post(f"/v1/queues/{queue.queue_topic}/messages", json={"messages": [{"value": "first"}]})
        [message] = receive(idle, queue, 1)  # a member of the worker group, with every partition
        assert statuses(idle, queue, "ack", [message["receipt"]]) == ["ok"]
        wait_for(lambda: left in caplog.text, what="the idle replica to leave the group")
        values = [{"value": f"v{i}", "key": f"key-{i}"} for i in range(8)]
        sent = busy.post(f"/v1/queues/{queue.queue_topic}/messages", json={"messages": values}).json()["messages"]
        assert {s["partition"] for s in sent} == {0, 1}
        received = receive(busy, queue, 8)
        assert sorted(m["value"] for m in received) == sorted(v["value"] for v in values)


@pytest.fixture
def tracker(queue: KmqConfig) -> Iterator[TrackerService]:
    service = TrackerService(TrackerConfig(kmq=queue, http_enabled=False)).run_in_thread()
    try:
        yield service
    finally:
        service.stop()


def test_an_unacked_message_comes_back_after_its_visibility_timeout(queue: KmqConfig, tracker: TrackerService) -> None:
    with replica(queue) as api:
        api.post(f"/v1/queues/{queue.queue_topic}/messages", json={"messages": [{"value": "again", "key": "k"}]})
        [first] = receive(api, queue, 1, visibility_timeout_ms=300)
        assert first["redelivery_count"] == 0
        [again] = receive(api, queue, 1, timeout_s=20.0)  # not acked: the tracker redelivers it
        assert (again["value"], again["key"], again["redelivery_count"]) == ("again", "k", 1)
        assert again["offset"] != first["offset"]
        assert statuses(api, queue, "ack", [again["receipt"]]) == ["ok"]
        assert api.post(f"/v1/queues/{queue.queue_topic}/receive", json={"wait_ms": 1000}).json() == {"messages": []}


def test_a_nacked_message_comes_back_at_once_through_any_replica(queue: KmqConfig, tracker: TrackerService) -> None:
    with replica(queue) as first, replica(queue) as second:
        first.post(f"/v1/queues/{queue.queue_topic}/messages", json={"messages": [{"value": "retry"}]})
        [message] = receive(first, queue, 1)
        assert statuses(second, queue, "nack", [message["receipt"]], delay_ms=0) == ["ok"]
        [again] = receive(first, queue, 1, timeout_s=20.0)
        assert (again["value"], again["redelivery_count"]) == ("retry", 1)
        assert statuses(first, queue, "ack", [again["receipt"]]) == ["ok"]
