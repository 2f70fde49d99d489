"""Two facade replicas settling the same deliveries at the same moment (issue 29): exactly one settle takes effect
everywhere — one replica answers 200, the other 409 — and the tracker ignores the one that lost, so no acknowledged
message comes back (the markers topic's order decides, kmq.receipt_notes)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kmq.config import KmqConfig
from kmq_tracker.config import TrackerConfig
from kmq_tracker.service import TrackerService
from tests.integration.test_api_replicas import receive, replica

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]
PAIRS = [("ack", "ack"), ("ack", "nack"), ("nack", "ack"), ("nack", "extend"), ("extend", "nack")]
PER_PAIR = 12
TIMEOUT_MS = 4_000
BODIES: dict[str, dict[str, Any]] = {"ack": {}, "nack": {"delay_ms": 0}, "extend": {"visibility_timeout_ms": 1_000}}


def settle(client: TestClient, queue: KmqConfig, action: str, receipt: str) -> int:
    body = {"receipts": [receipt], **BODIES[action]}
    response = client.post(f"/v1/queues/{queue.queue_topic}/{action}", json=body)
    if response.status_code == 200:
        [result] = response.json()["results"]
        assert result["status"] == "ok", result
    return response.status_code


def race(first: TestClient, second: TestClient, queue: KmqConfig, actions: tuple[str, str], receipt: str) -> str:
    """Both replicas settle `receipt` at once; the action that took effect."""
    ready = threading.Barrier(2)
    codes: dict[int, int] = {}

    def one(index: int, client: TestClient) -> None:
        ready.wait(10)
        codes[index] = settle(client, queue, actions[index], receipt)

    threads = [threading.Thread(target=one, args=(i, c)) for i, c in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(codes.values()) == [200, 409], (actions, codes)
    return actions[0] if codes[0] == 200 else actions[1]


def test_two_replicas_racing_on_each_receipt_settle_it_once_and_no_ack_is_undone(make_config: MakeConfig) -> None:
    queue = make_config(partitions=2, msg_timeout_ms=TIMEOUT_MS)
    count = len(PAIRS) * PER_PAIR
    tracker = TrackerService(TrackerConfig(kmq=queue, http_enabled=False)).run_in_thread()
    try:
        with replica(queue) as first, replica(queue) as second:
            values = [{"value": f"m{i}"} for i in range(count)]
            assert first.post(f"/v1/queues/{queue.queue_topic}/messages", json={"messages": values}).status_code == 200
            received = receive(first, queue, count)
            # when both replicas settle each delivery at once, in every pairing of actions
            jobs = [(PAIRS[i % len(PAIRS)], m) for i, m in enumerate(received)]
            with ThreadPoolExecutor(4) as pool:
                won = list(pool.map(lambda job: race(first, second, queue, job[0], job[1]["receipt"]), jobs))
            # then each got one 200 and one 409 (in `race`); what won decides what comes back
            winners = Counter(won)
            assert sum(winners.values()) == count and set(winners) <= {"ack", "nack", "extend"}
            acked = {m["value"] for (_, m), action in zip(jobs, won, strict=True) if action == "ack"}
            assert acked, "no ack won any race"
            # every message not acked comes back (nacked at once, extended ones after 1 s); acked ones never do
            done = set(acked)
            back: list[str] = []
            deadline = time.monotonic() + 60
            quiet_until = None
            while quiet_until is None or time.monotonic() < quiet_until:
                assert time.monotonic() < deadline, f"still missing: {sorted({v['value'] for v in values} - done)}"
                batch = first.post(f"/v1/queues/{queue.queue_topic}/receive", json={"wait_ms": 500}).json()
                for message in batch["messages"]:
                    back.append(message["value"])
                    done.add(message["value"])
                    assert settle(first, queue, "ack", message["receipt"]) == 200
                if quiet_until is None and len(done) == count:
                    quiet_until = time.monotonic() + TIMEOUT_MS / 1000 + 2  # a wrongly undone ack would be back
            assert acked.isdisjoint(back), f"acknowledged messages came back: {sorted(acked & set(back))}"
    finally:
        tracker.stop()
