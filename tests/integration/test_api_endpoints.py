"""Every endpoint of the REST facade against a real broker, checked against what is really on the topics."""

from __future__ import annotations

import base64
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from fastapi.testclient import TestClient
from pydantic import SecretStr

from kmq.config import KmqConfig
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq_api.app import create_app
from kmq_api.config import ApiConfig
from kmq_api.receipts import Receipt, ReceiptSigner
from tests.helpers import Record, read_topic, wait_for

SECRET = "receipt-secret-for-the-api-tests!"
KEY = "api-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
PARTITIONS = 2
MAX_MESSAGE_BYTES = 1000
MAX_BODY_BYTES = 32 * 1024
MakeConfig = Callable[..., KmqConfig]


def api_config(queue: KmqConfig, **changes: Any) -> ApiConfig:
    fields: dict[str, Any] = {
        "queues": (queue,),
        "receipt_secret": SECRET,
        "api_keys": (SecretStr(KEY),),
        "max_message_bytes": MAX_MESSAGE_BYTES,
        "max_body_bytes": MAX_BODY_BYTES,
    }
    return ApiConfig(**{**fields, **changes})


@pytest.fixture
def queue(make_config: MakeConfig) -> KmqConfig:
    return make_config(partitions=PARTITIONS, marker_format="kmq")  # the tests read kmq markers back


@pytest.fixture
def http(queue: KmqConfig) -> Iterator[TestClient]:
    with TestClient(create_app(api_config(queue)), headers=AUTH) as client:
        yield client


def url(queue: KmqConfig, action: str = "") -> str:
    return f"/v1/queues/{queue.queue_topic}{'/' + action if action else ''}"


def send(http: TestClient, queue: KmqConfig, *values: str) -> list[dict[str, int]]:
    response = http.post(url(queue, "messages"), json={"messages": [{"value": v} for v in values]})
    assert response.status_code == 200, response.text
    sent: list[dict[str, int]] = response.json()["messages"]
    return sent


def receive(http: TestClient, queue: KmqConfig, count: int, **body: Any) -> list[dict[str, Any]]:
    """Long-poll until `count` messages came (the first poll also waits for the consumer group join)."""
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while len(received) < count:
        assert time.monotonic() < deadline, f"received {len(received)} of {count}"
        request = {"max_messages": count - len(received), "wait_ms": 2000, **body}
        response = http.post(url(queue, "receive"), json=request)
        assert response.status_code == 200, response.text
        received += response.json()["messages"]
    return received


def settle(http: TestClient, queue: KmqConfig, action: str, receipts: list[str], **body: Any) -> list[dict[str, Any]]:
    response = http.post(url(queue, action), json={"receipts": receipts, **body})
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def markers_of(queue: KmqConfig, partition: int, offset: int) -> list[bytes | None]:
    key = MarkerKey(partition, offset).encode()
    return [r.value for r in read_topic(queue, queue.markers_topic, PARTITIONS) if r.key == key]


def within(deadline_ms: int, earliest_ms: int, latest_ms: int) -> bool:
    """Between the clock before and after the call (1 s slack: the broker's clock may stamp the START)."""
    return earliest_ms - 1_000 <= deadline_ms <= latest_ms + 1_000


def at(records: list[Record], partition: int, offset: int) -> Record:
    return next(r for r in records if (r.partition, r.offset) == (partition, offset))


# -- send -------------------------------------------------------------------------------------------------------


def test_send_stores_each_message_where_it_answers(http: TestClient, queue: KmqConfig) -> None:
    messages = [
        {"value": "héllo", "key": "k1", "headers": {"trace": "t-1"}},
        {
            "value": base64.b64encode(b"\x00\xff").decode(),
            "encoding": "base64",
            "key": "/w==",
            "headers": {"b": "AA=="},
        },
        {"value": None, "key": "gone"},
    ]
    response = http.post(url(queue, "messages"), json={"messages": messages})
    assert response.status_code == 200, response.text
    places = response.json()["messages"]
    records = read_topic(queue, queue.queue_topic, PARTITIONS)
    stored = [at(records, p["partition"], p["offset"]) for p in places]
    assert [(r.value, r.key, r.headers) for r in stored] == [
        ("héllo".encode(), b"k1", [("trace", b"t-1")]),
        (b"\x00\xff", b"\xff", [("b", b"\x00")]),
        (None, b"gone", []),
    ]


def test_send_refuses_undecodable_base64_naming_the_field(http: TestClient, queue: KmqConfig) -> None:
    body = {"messages": [{"value": "aGk="}, {"value": "not*base64", "encoding": "base64"}]}
    response = http.post(url(queue, "messages"), json=body)
    assert response.status_code == 400
    assert response.json()["detail"].startswith("messages[1].value: not valid base64")
    assert read_topic(queue, queue.queue_topic, PARTITIONS) == []


def test_send_refuses_a_message_over_the_size_limit(http: TestClient, queue: KmqConfig) -> None:
    body = {"messages": [{"value": "small"}, {"value": "x" * (MAX_MESSAGE_BYTES + 1)}]}
    response = http.post(url(queue, "messages"), json=body)
    assert response.status_code == 413
    assert "messages[1]" in response.json()["detail"]
    assert read_topic(queue, queue.queue_topic, PARTITIONS) == []


def test_a_message_kafka_refuses_as_too_large_is_413(queue: KmqConfig) -> None:
    config = api_config(queue, max_message_bytes=4_000_000, max_body_bytes=8_000_000)
    with TestClient(create_app(config), headers=AUTH) as http:
        response = http.post(url(queue, "messages"), json={"messages": [{"value": "x" * 2_000_000}]})
    assert response.status_code == 413
    assert response.json()["detail"].startswith("messages[0] is larger than the broker accepts")


def test_a_body_over_the_limit_is_413(http: TestClient, queue: KmqConfig) -> None:
    body = {"messages": [{"value": "x" * 900} for _ in range(40)]}
    response = http.post(url(queue, "messages"), json=body)
    assert response.status_code == 413
    assert str(MAX_BODY_BYTES) in response.json()["detail"]


# -- receive and settle -----------------------------------------------------------------------------------------


def test_receive_then_ack_round_trip(http: TestClient, queue: KmqConfig) -> None:
    send(http, queue, "a", "b", "c")
    before_ms = int(time.time() * 1000)
    received = receive(http, queue, 3)
    after_ms = int(time.time() * 1000)
    assert sorted(m["value"] for m in received) == ["a", "b", "c"]
    for message in received:
        assert message["redelivery_count"] == 0
        assert message["encoding"] == "utf-8"
        assert within(message["deadline_ms"], before_ms + queue.msg_timeout_ms, after_ms + queue.msg_timeout_ms)
    results = settle(http, queue, "ack", [m["receipt"] for m in received])
    assert [r["status"] for r in results] == ["ok"] * 3
    assert [(r["partition"], r["offset"]) for r in results] == [(m["partition"], m["offset"]) for m in received]
    for message in received:
        start = StartMarker(queue.msg_timeout_ms).encode()
        assert markers_of(queue, message["partition"], message["offset"]) == [start, EndMarker().encode()]
    assert http.post(url(queue, "receive"), json={"wait_ms": 200}).json() == {"messages": []}


def test_bytes_that_are_not_utf8_come_back_as_base64(http: TestClient, queue: KmqConfig) -> None:
    body = {"messages": [{"value": "/wA=", "encoding": "base64"}, {"value": "aGk=", "encoding": "base64"}]}
    assert http.post(url(queue, "messages"), json=body).status_code == 200
    received = receive(http, queue, 2)
    assert sorted((m["encoding"], m["value"]) for m in received) == [("base64", "/wA="), ("utf-8", "hi")]


def test_a_visibility_timeout_sets_the_start_duration_and_deadline(http: TestClient, queue: KmqConfig) -> None:
    send(http, queue, "v")
    before_ms = int(time.time() * 1000)
    [message] = receive(http, queue, 1, visibility_timeout_ms=4321)
    assert within(message["deadline_ms"], before_ms + 4321, int(time.time() * 1000) + 4321)
    assert markers_of(queue, message["partition"], message["offset"]) == [StartMarker(4321).encode()]


def test_a_message_with_a_negative_redelivery_count_is_received_and_nacked(http: TestClient, queue: KmqConfig) -> None:
    # given a message another Kafka producer wrote with a kmq-redelivery-count that reads as a negative int32
    producer = Producer(queue.kafka_settings())
    producer.produce(queue.queue_topic, b"odd", headers=[("kmq-redelivery-count", struct.pack(">i", -1))])
    assert producer.flush(10) == 0
    # when it is received, then nacked with the default backoff: a 200 each (the count reads as 0), never a 500
    [message] = receive(http, queue, 1)
    assert [r["status"] for r in settle(http, queue, "nack", [message["receipt"]])] == ["ok"]
    backoff = StartMarker(queue.nack_delay_ms(0)).encode()
    assert markers_of(queue, message["partition"], message["offset"])[-1] == backoff


def test_a_long_poll_waits_then_answers_empty(http: TestClient, queue: KmqConfig) -> None:
    started = time.monotonic()
    response = http.post(url(queue, "receive"), json={"max_messages": 5, "wait_ms": 400})
    assert (response.status_code, response.json()) == (200, {"messages": []})
    assert time.monotonic() - started >= 0.4


def test_nack_writes_a_start_with_the_delay_or_the_backoff(http: TestClient, queue: KmqConfig) -> None:
    send(http, queue, "n1", "n2")
    first, second = receive(http, queue, 2)
    assert [r["status"] for r in settle(http, queue, "nack", [first["receipt"]], delay_ms=0)] == ["ok"]
    assert [r["status"] for r in settle(http, queue, "nack", [second["receipt"]])] == ["ok"]
    start = StartMarker(queue.msg_timeout_ms).encode()
    assert markers_of(queue, first["partition"], first["offset"]) == [start, StartMarker(0).encode()]
    backoff = StartMarker(queue.nack_delay_ms(0)).encode()
    assert markers_of(queue, second["partition"], second["offset"]) == [start, backoff]


def test_extend_writes_a_start_and_hands_out_a_fresh_receipt(http: TestClient, queue: KmqConfig) -> None:
    send(http, queue, "e")
    [message] = receive(http, queue, 1)
    before_ms = int(time.time() * 1000)
    [result] = settle(http, queue, "extend", [message["receipt"]], visibility_timeout_ms=60_000)
    assert result["status"] == "ok"
    assert within(result["deadline_ms"], before_ms + 60_000, int(time.time() * 1000) + 60_000)
    assert result["receipt"] != message["receipt"]
    assert [r["status"] for r in settle(http, queue, "ack", [result["receipt"]])] == ["ok"]
    start = StartMarker(queue.msg_timeout_ms).encode()
    expected = [start, StartMarker(60_000).encode(), EndMarker().encode()]
    assert markers_of(queue, message["partition"], message["offset"]) == expected


def test_forged_tampered_and_foreign_receipts_are_refused_and_never_acted_on(
    http: TestClient, queue: KmqConfig
) -> None:
    send(http, queue, "f")
    [message] = receive(http, queue, 1)
    real = message["receipt"]
    receipt = Receipt(queue.queue_topic, message["partition"], message["offset"], 0, 2**62, 0)
    tampered = real[:10] + ("A" if real[10] != "A" else "B") + real[11:]
    forged = ReceiptSigner(b"another secret, another cluster").sign(receipt)
    foreign = ReceiptSigner(SECRET.encode()).sign(Receipt("someone-elses-queue", *_where(receipt)))
    tokens = ["", "not a receipt", tampered, forged, foreign]
    for action, extra in (("ack", {}), ("nack", {"delay_ms": 0}), ("extend", {"visibility_timeout_ms": 1000})):
        results = settle(http, queue, action, tokens, **extra)
        assert [r["status"] for r in results] == ["invalid", "invalid", "invalid", "invalid", "wrong_queue"]
        assert all(r["partition"] is None for r in results)
    assert markers_of(queue, message["partition"], message["offset"]) == [StartMarker(queue.msg_timeout_ms).encode()]
    assert [r["status"] for r in settle(http, queue, "ack", [real])] == ["ok"]


def _where(receipt: Receipt) -> tuple[int, int, int, int, int]:
    return receipt.partition, receipt.offset, receipt.issued_at_ms, receipt.deadline_ms, receipt.redelivery_count


def test_an_expired_receipt_still_acks_but_never_revives(http: TestClient, queue: KmqConfig) -> None:
    send(http, queue, "x1", "x2")
    first, second = receive(http, queue, 2)
    signer = ReceiptSigner(SECRET.encode())
    past_ms = int(time.time() * 1000) - 1
    late = [
        signer.sign(Receipt(queue.queue_topic, m["partition"], m["offset"], 0, past_ms, 0)) for m in (first, second)
    ]
    [acked] = settle(http, queue, "ack", late[:1])
    [nacked] = settle(http, queue, "nack", late[1:], delay_ms=0)
    [extended] = settle(http, queue, "extend", late[1:], visibility_timeout_ms=1000)
    assert (acked["status"], nacked["status"], extended["status"]) == ("expired", "expired", "expired")
    start = StartMarker(queue.msg_timeout_ms).encode()
    assert markers_of(queue, first["partition"], first["offset"]) == [start, EndMarker().encode()]
    assert markers_of(queue, second["partition"], second["offset"]) == [start]


# -- queue, probes ----------------------------------------------------------------------------------------------


def test_queue_info_reports_partitions_and_the_worker_groups_backlog(http: TestClient, queue: KmqConfig) -> None:
    sent = send(http, queue, *(f"b{i}" for i in range(7)))
    info = http.get(url(queue)).json()
    assert (info["queue"], info["markers_topic"], info["group_id"]) == (
        queue.queue_topic,
        queue.markers_topic,
        queue.group_id,
    )
    assert (info["partition_count"], info["backlog"]) == (PARTITIONS, 7)
    ends = {p: 1 + max(s["offset"] for s in sent if s["partition"] == p) for p in {s["partition"] for s in sent}}
    assert {p["partition"]: p["end_offset"] for p in info["partitions"] if p["end_offset"]} == ends
    receive(http, queue, 4)
    # the receive's commit is asynchronous (pipelined STARTs): it lands a moment after the answer
    wait_for(lambda: http.get(url(queue)).json()["backlog"] == 3, 10, what="the backlog after the receive's commit")
    info = http.get(url(queue)).json()
    assert all(p["committed_offset"] is not None for p in info["partitions"] if p["end_offset"] and p["backlog"] == 0)


def test_probes_and_metrics(http: TestClient, queue: KmqConfig) -> None:
    send(http, queue, "m")
    assert http.get("/healthz", headers={}).json() == {"status": "ok", "detail": None}
    assert http.get("/readyz").json()["status"] == "ok"
    metrics = http.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    assert f'kmq_api_messages_sent_total{{topic="{queue.queue_topic}"}} 1.0' in metrics.text


# -- auth, unknown queues, invalid bodies ------------------------------------------------------------------------

ENDPOINTS = [
    ("post", "messages", {"messages": [{"value": "v"}]}),
    ("post", "receive", {"wait_ms": 0}),
    ("post", "ack", {"receipts": ["r"]}),
    ("post", "nack", {"receipts": ["r"]}),
    ("post", "extend", {"receipts": ["r"], "visibility_timeout_ms": 1000}),
    ("get", "", None),
]


@pytest.fixture(scope="module")
def shared(kafka: Any) -> Iterator[tuple[TestClient, KmqConfig]]:
    """One app for the tests that never reach Kafka's data (auth, 404, 422): one start-up for all of them."""
    queue = kafka.config(f"t-api-shared-{time.monotonic_ns()}")
    kafka.ensure_topics(queue, PARTITIONS)
    with TestClient(create_app(api_config(queue))) as client:
        yield client, queue


@pytest.mark.parametrize(("method", "action", "body"), ENDPOINTS)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}])
def test_a_missing_or_wrong_key_is_401(
    shared: tuple[TestClient, KmqConfig], method: str, action: str, body: Any, headers: dict[str, str]
) -> None:
    client, queue = shared
    response = client.request(method, url(queue, action), json=body, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "action", "body"), ENDPOINTS)
def test_a_queue_not_served_is_404(shared: tuple[TestClient, KmqConfig], method: str, action: str, body: Any) -> None:
    client, _ = shared
    path = f"/v1/queues/not-served{'/' + action if action else ''}"
    response = client.request(method, path, json=body, headers=AUTH)
    assert response.status_code == 404
    assert "not-served" in response.json()["detail"]


@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("receive", {"max_messages": 0}, ["body", "max_messages"]),
        ("receive", {"max_messages": 1001}, ["body", "max_messages"]),
        ("receive", {"max_messages": "5"}, ["body", "max_messages"]),
        ("receive", {"wait_ms": 20_001}, ["body", "wait_ms"]),
        ("receive", {"visibility_timeout_ms": 0}, ["body", "visibility_timeout_ms"]),
        ("receive", {"surprise": 1}, ["body", "surprise"]),
        ("messages", {"messages": []}, ["body", "messages"]),
        ("messages", {"messages": [{"key": "k"}]}, ["body", "messages", 0, "value"]),
        ("messages", {"messages": [{"value": "v", "encoding": "utf-16"}]}, ["body", "messages", 0, "encoding"]),
        ("messages", {"messages": [{"value": "v", "headers": {"kmq-redelivery-count": "9"}}]}, None),
        ("ack", {"receipts": []}, ["body", "receipts"]),
        ("ack", {"receipts": [1]}, ["body", "receipts", 0]),
        ("nack", {"receipts": ["r"], "delay_ms": -1}, ["body", "delay_ms"]),
        ("extend", {"receipts": ["r"]}, ["body", "visibility_timeout_ms"]),
        ("extend", {"receipts": ["r"], "visibility_timeout_ms": 0}, ["body", "visibility_timeout_ms"]),
    ],
)
def test_an_invalid_body_is_422_naming_the_field(
    shared: tuple[TestClient, KmqConfig], action: str, body: dict[str, Any], field: list[Any] | None
) -> None:
    client, queue = shared
    response = client.post(url(queue, action), json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    locations = [error["loc"] for error in response.json()["detail"]]
    assert field in locations if field is not None else locations[0][:4] == ["body", "messages", 0, "headers"]


def test_a_body_that_is_not_json_is_422(shared: tuple[TestClient, KmqConfig]) -> None:
    client, queue = shared
    headers = {**AUTH, "Content-Type": "application/json"}
    response = client.post(url(queue, "receive"), content=b"{not json", headers=headers)
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "json_invalid"


def test_anonymous_access_when_configured_so(queue: KmqConfig) -> None:
    config = api_config(queue, api_keys=(), allow_anonymous=True)
    with TestClient(create_app(config)) as client:
        assert client.post(url(queue, "receive"), json={"wait_ms": 0}).status_code == 200
