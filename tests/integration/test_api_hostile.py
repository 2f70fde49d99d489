"""The REST facade under hostile input: non-finite numbers, replayed receipts (issue 15, items 9 and 10)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from fastapi.testclient import TestClient

from kmq import admin
from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq_api.app import create_app
from kmq_api.receipts import Receipt, ReceiptSigner
from kmq_api.state import ApiState
from tests.helpers import wait_for
from tests.integration.test_api_endpoints import (
    AUTH,
    PARTITIONS,
    SECRET,
    api_config,
    markers_of,
    receive,
    send,
    settle,
    url,
)
from tests.integration.test_client import transactions_of
from tests.integration.test_client_faults import _raise, inject

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


# -- a receipt settles once (item 9) -------------------------------------------------------------------------------

SETTLES = [("ack", {}), ("nack", {"delay_ms": 0}), ("extend", {"visibility_timeout_ms": 60_000})]


@pytest.fixture
def queue(make_config: Any) -> KmqConfig:
    config: KmqConfig = make_config(partitions=PARTITIONS, marker_format="kmq")  # per-offset STARTs, read back
    return config


def conflict(http: TestClient, queue: KmqConfig, action: str, receipts: list[str], **body: Any) -> str:
    response = http.post(url(queue, action), json={"receipts": receipts, **body})
    assert response.status_code == 409, response.text
    detail: str = response.json()["detail"]
    return detail


@pytest.mark.parametrize(("first", "first_body"), SETTLES[:2])
def test_a_settled_receipt_is_409_for_every_second_settle_and_writes_nothing(
    queue: KmqConfig, first: str, first_body: dict[str, Any]
) -> None:
    with TestClient(create_app(api_config(queue)), headers=AUTH) as http:
        send(http, queue, "once")
        [message] = receive(http, queue, 1)
        assert [r["status"] for r in settle(http, queue, first, [message["receipt"]], **first_body)] == ["ok"]
        written = markers_of(queue, message["partition"], message["offset"])
        for action, body in SETTLES:
            detail = conflict(http, queue, action, [message["receipt"]], **body)
            assert f"already settled by {first}" in detail
        assert markers_of(queue, message["partition"], message["offset"]) == written


def test_an_extended_delivery_settles_once_whichever_receipt_is_used(queue: KmqConfig) -> None:
    with TestClient(create_app(api_config(queue)), headers=AUTH) as http:
        send(http, queue, "slow")
        [message] = receive(http, queue, 1)
        [extended] = settle(http, queue, "extend", [message["receipt"]], visibility_timeout_ms=60_000)
        assert [r["status"] for r in settle(http, queue, "ack", [extended["receipt"]])] == ["ok"]
        conflict(http, queue, "extend", [message["receipt"]], visibility_timeout_ms=60_000)
        conflict(http, queue, "nack", [extended["receipt"]])
        start = StartMarker(queue.msg_timeout_ms).encode()
        expected = [start, StartMarker(60_000).encode(), EndMarker().encode()]
        assert markers_of(queue, message["partition"], message["offset"]) == expected


def test_one_receipt_twice_in_a_request_is_409_and_writes_nothing(queue: KmqConfig) -> None:
    with TestClient(create_app(api_config(queue)), headers=AUTH) as http:
        send(http, queue, "twice")
        [message] = receive(http, queue, 1)
        conflict(http, queue, "ack", [message["receipt"], message["receipt"]])
        start = StartMarker(queue.msg_timeout_ms).encode()
        assert markers_of(queue, message["partition"], message["offset"]) == [start]


def test_settled_receipts_survive_a_restart_and_are_shared_by_replicas(queue: KmqConfig) -> None:
    # given a delivery acked at one replica, which is then shut down
    with TestClient(create_app(api_config(queue)), headers=AUTH) as first:
        send(first, queue, "r1", "r2")
        acked, other = receive(first, queue, 2)
        assert [r["status"] for r in settle(first, queue, "ack", [acked["receipt"]])] == ["ok"]
    with (
        TestClient(create_app(api_config(queue)), headers=AUTH) as restarted,
        TestClient(create_app(api_config(queue)), headers=AUTH) as replica,
    ):
        # then a restarted replica refuses to settle it again
        conflict(restarted, queue, "nack", [acked["receipt"]], delay_ms=0)
        # and what one running replica settles, the other refuses once it has read the marker
        assert [r["status"] for r in settle(restarted, queue, "nack", [other["receipt"]], delay_ms=0)] == ["ok"]
        key = MarkerKey(other["partition"], other["offset"])
        state: ApiState = replica.app_state["kmq"]
        view = state.queues[queue.queue_topic].settled
        wait_for(lambda: view.settled_by(key, _issued_at(queue, other)) == "nack", what="the replica to read the nack")
        conflict(replica, queue, "ack", [other["receipt"]])
    start = StartMarker(queue.msg_timeout_ms).encode()
    assert markers_of(queue, acked["partition"], acked["offset"]) == [start, EndMarker().encode()]
    assert markers_of(queue, other["partition"], other["offset"]) == [start, StartMarker(0).encode()]


def _issued_at(queue: KmqConfig, message: dict[str, Any]) -> int:
    receipt = ReceiptSigner(SECRET.encode()).verify(message["receipt"], queue.queue_topic)
    assert isinstance(receipt, Receipt)
    return receipt.issued_at_ms


# -- a receiver that cannot recover (item 7) ------------------------------------------------------------------------


def test_health_reports_a_receiver_whose_transactions_cannot_recover(kafka: KafkaCluster, make_config: Any) -> None:
    if kafka.backend == "mock":
        pytest.skip("librdkafka's mock cluster does not store transactional offset commits")
    queue: KmqConfig = make_config(partitions=PARTITIONS, transactional=True)
    with TestClient(create_app(api_config(queue)), headers=AUTH) as http:
        assert http.post(url(queue, "receive"), json={"wait_ms": 0}).status_code == 200  # joins the worker group
        receiver = http.app_state["kmq"].queues[queue.queue_topic]._receiver
        fenced = KafkaError(KafkaError._FENCED, "fenced", fatal=True)
        inject(receiver, fenced, "commit_transaction")
        unreachable = KafkaException(KafkaError(KafkaError._TRANSPORT, "no broker"))
        transactions_of(receiver)._new_producer = lambda timeout_s: _raise(unreachable)
        send(http, queue, "stuck")
        deadline = time.monotonic() + 30
        while (answer := http.post(url(queue, "receive"), json={"wait_ms": 500})).status_code == 200:
            assert not answer.json()["messages"] and time.monotonic() < deadline, answer.text
        assert answer.status_code == 503 and "cannot be replaced" in answer.json()["detail"]
        health = http.get("/healthz")
        assert health.status_code == 503
        assert health.json()["detail"] == f"the receiver of {queue.queue_topic} cannot recover: no broker"


# -- probes (item 4) -----------------------------------------------------------------------------------------------


def test_readyz_reuses_one_admin_client(shared: tuple[TestClient, KmqConfig], monkeypatch: Any) -> None:
    client, _ = shared
    built: list[object] = []
    real = admin.AdminClient  # type: ignore[attr-defined]  # the name kmq.admin builds clients by

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(admin, "AdminClient", counted)
    for _ in range(3):
        assert client.get("/readyz").json()["status"] == "ok"
    assert built == []
