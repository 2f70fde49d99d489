"""The REST facade from a test's side: send, receive and ack over HTTP (tests/deploy's containers, tests/k8s's pods)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Delivery:
    value: str
    partition: int
    receipt: str
    redelivery_count: int


def receive(http: httpx.Client, visibility_ms: int, max_messages: int = 100) -> list[Delivery]:
    body = {"max_messages": max_messages, "wait_ms": 500, "visibility_timeout_ms": visibility_ms}
    answer = http.post("/receive", json=body)
    assert answer.status_code == 200, answer.text
    return [
        Delivery(m["value"], m["partition"], m["receipt"], m["redelivery_count"]) for m in answer.json()["messages"]
    ]


def ack(http: httpx.Client, deliveries: list[Delivery]) -> None:
    if not deliveries:
        return
    answer = http.post("/ack", json={"receipts": [d.receipt for d in deliveries]})
    assert answer.status_code == 200, answer.text
    assert [r["status"] for r in answer.json()["results"]] == ["ok"] * len(deliveries), answer.text


def send(http: httpx.Client, values: list[str]) -> list[int]:
    """The partition of each (keyed by value, so they spread over the partitions)."""
    answer = http.post("/messages", json={"messages": [{"value": v, "key": v} for v in values]})
    assert answer.status_code == 200, answer.text
    return [m["partition"] for m in answer.json()["messages"]]
