"""The REST facade as deployed (two `python -m kmq_api` replicas) under hostile clients (issue 15, fault tests): keys
that almost match, forged and tampered receipts, and receipts replayed at another replica, after a restart and
all at once. Nothing is ever acted on twice; the markers topic shows it."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from kmq.config import KmqConfig
from kmq.demo.processes import Children
from kmq.demo.services import LOCALHOST, Service, free_port, wait_ready
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq_api.receipts import Receipt, ReceiptSigner
from tests.helpers import read_topic, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.integration]
MakeConfig = Callable[..., KmqConfig]
KEY = secrets.token_urlsafe(24)
SECRET = secrets.token_hex(32)
AUTH = {"Authorization": f"Bearer {KEY}"}


@contextmanager
def replicas(config: KmqConfig, log_dir: Path, count: int = 2) -> Iterator[tuple[Children, list[Service]]]:
    children = Children(log_dir)
    try:
        services = [start_replica(children, config, f"api-{i}") for i in range(count)]
        wait_ready(children, services, "/readyz", 60.0)
        yield children, services
    finally:
        children.stop_all(20.0)


def start_replica(children: Children, config: KmqConfig, name: str) -> Service:
    port = free_port()
    env = {
        **config.to_env(),
        "KMQ_API_QUEUES": config.queue_topic,
        "KMQ_API_KEYS": KEY,
        "KMQ_API_RECEIPT_SECRET": SECRET,
        "KMQ_API_HOST": LOCALHOST,
        "KMQ_API_PORT": str(port),
    }
    return Service(children.spawn(name, ["-m", "kmq_api"], env), f"http://{LOCALHOST}:{port}")


def post(service: Service, config: KmqConfig, action: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    url = f"{service.url}/v1/queues/{config.queue_topic}/{action}"
    return httpx.post(url, json=body, headers={**AUTH, **headers}, timeout=30)


def receive(service: Service, config: KmqConfig, count: int) -> list[dict[str, Any]]:
    received: list[dict[str, Any]] = []

    def more() -> bool:
        body = {"wait_ms": 500, "max_messages": count - len(received)}
        received.extend(post(service, config, "receive", body).json()["messages"])
        return len(received) == count

    wait_for(more, what=f"{count} messages")
    return received


def remembered(service: Service, config: KmqConfig) -> float:
    text = httpx.get(f"{service.url}/metrics", timeout=10).text
    line = f'kmq_api_receipt_notes{{topic="{config.queue_topic}"}} '
    return next((float(row[len(line) :]) for row in text.splitlines() if row.startswith(line)), 0.0)


def markers_of(config: KmqConfig, partition: int, offset: int) -> list[bytes | None]:
    key = MarkerKey(partition, offset).encode()
    return [r.value for r in read_topic(config, config.markers_topic, 2) if r.key == key]


def test_keys_that_almost_match_are_401(make_config: MakeConfig, tmp_path: Path) -> None:
    config = make_config(partitions=2)
    almost = [f"Bearer {KEY[:-1]}", f"bearer{KEY}", f"Basic {KEY}", KEY, f"Bearer {KEY}x", "Bearer x"]
    with replicas(config, tmp_path, count=1) as (_, [api]):
        for authorization in [*almost, "Bearer " + "k" * 8000]:
            response = post(api, config, "receive", {"wait_ms": 0}, Authorization=authorization)
            assert response.status_code in (401, 431), (authorization[:20], response.text)
        assert post(api, config, "receive", {"wait_ms": 0}).status_code == 200


def test_forged_and_replayed_receipts_are_never_acted_on_twice(make_config: MakeConfig, tmp_path: Path) -> None:
    config = make_config(partitions=2, msg_timeout_ms=60_000, marker_format="kmq")  # per-offset STARTs, read back
    with replicas(config, tmp_path) as (children, [a, b]):
        sent = post(a, config, "messages", {"messages": [{"value": f"v{i}"} for i in range(3)]})
        assert sent.status_code == 200, sent.text
        first, second, third = receive(a, config, 3)
        # forged: another secret, a tampered byte, another queue
        real = Receipt(config.queue_topic, first["partition"], first["offset"], 0, 2**62, 0)
        forged = [
            ReceiptSigner(b"x" * 32).sign(real),
            first["receipt"][:-2] + ("AA" if first["receipt"][-2:] != "AA" else "BB"),
            ReceiptSigner(SECRET.encode()).sign(Receipt("other-queue", 0, 0, 0, 2**62, 0)),
        ]
        results = post(b, config, "nack", {"receipts": forged, "delay_ms": 0}).json()["results"]
        assert [r["status"] for r in results] == ["invalid", "invalid", "wrong_queue"]
        # replayed at the other replica: settled once
        assert post(a, config, "ack", {"receipts": [first["receipt"]]}).json()["results"][0]["status"] == "ok"
        # (b answers 409 once it has read a's END: a replay within that moment, ~ms, would pass; see api.settle)
        wait_for(lambda: remembered(b, config) >= 1, what="b to read the note of a's ack")
        assert post(b, config, "nack", {"receipts": [first["receipt"]]}).status_code == 409
        # the same receipt ten times at once at one replica: one ok, nine 409
        with ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(lambda _: post(a, config, "ack", {"receipts": [second["receipt"]]}), range(10)))
        assert Counter(r.status_code for r in answers) == Counter({200: 1, 409: 9})
        # replayed after a restart of the replica that settled it
        children.stop([a.child], 20.0)
        restarted = start_replica(children, config, "api-0-restarted")
        wait_ready(children, [restarted], "/readyz", 60.0)
        for action, body in (("ack", {}), ("nack", {"delay_ms": 0}), ("extend", {"visibility_timeout_ms": 1000})):
            response = post(restarted, config, action, {"receipts": [second["receipt"]], **body})
            assert response.status_code == 409, response.text
    start, end = StartMarker(60_000).encode(), EndMarker().encode()
    assert markers_of(config, first["partition"], first["offset"]) == [start, end]
    assert markers_of(config, second["partition"], second["offset"]) == [start, end]
    assert markers_of(config, third["partition"], third["offset"]) == [start]
