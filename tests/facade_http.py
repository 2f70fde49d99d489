"""The REST facade from a test's side: send, receive and ack over HTTP (tests/deploy's containers, tests/k8s's pods)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
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


# -- scenarios the container tests (tests/deploy) and the cluster tests (tests/k8s) both run -------------------------


@dataclass(frozen=True)
class LeftOnePerPartition:
    used_partitions: set[int]
    left: dict[int, Delivery]  # partition -> its first delivery, left unacknowledged
    copies: list[Delivery]  # the redeliveries received (and acknowledged)


def leave_one_per_partition(
    http: httpx.Client, values: list[str], visibility_ms: int, timeout_s: float = 90
) -> LeftOnePerPartition:
    """Send `values` (spread over the partitions), receive them, acknowledge all but the first of each partition, and
    go on receiving until every one left has come back once (acknowledged then)."""
    used = set(send(http, values))
    left: dict[int, Delivery] = {}
    seen: set[str] = set()
    copies: list[Delivery] = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < len(values) or len(copies) < len(left):
        received = f"received {len(seen)} of {len(values)} and {len(copies)} copies in {timeout_s} s"
        assert time.monotonic() < deadline, received
        for delivery in receive(http, visibility_ms):
            if delivery.redelivery_count == 0:
                seen.add(delivery.value)
                if delivery.partition not in left:
                    left[delivery.partition] = delivery
                    continue
            else:
                copies.append(delivery)
            ack(http, [delivery])
    return LeftOnePerPartition(used, left, copies)


@dataclass(frozen=True)
class Disrupted:
    sent: list[str]
    settled: set[str]
    left_with_victim: dict[str, float]  # left unacknowledged in the victim's partitions before the blow: when
    copies: list[Delivery]
    struck_at: float  # time.monotonic() of the blow


def stream_through_a_blow(
    client: Callable[[], httpx.Client],
    strike: Callable[[], None],
    victims_partitions: set[int],
    visibility_ms: int,
    timeout_s: float = 180,
    batches: int = 20,
    per_batch: int = 10,
) -> Disrupted:
    """A batch of messages every 0.2 s over HTTP while a receiver acknowledges them, except all of the first batch
    and every tenth message after it (a tracker must redeliver those). Mid-stream, once messages of the victim's
    partitions are left unacknowledged, `strike()` (a tracker killed or deleted); half of the stream comes after it.
    Returns once everything sent is settled (copies included), or fails at `timeout_s`."""
    sent: list[str] = []
    failure: list[Exception] = []
    struck = threading.Event()

    def stream() -> None:
        try:
            with client() as http:
                for batch in range(batches):
                    values = [f"s{batch}-{i}" for i in range(per_batch)]
                    send(http, values)
                    sent.extend(values)
                    if batch == batches // 2:
                        struck.wait(60)  # half of the stream after the blow, however slow the receiver is
                    time.sleep(0.2)  # the stream's pace, not a wait for a condition
        except Exception as error:  # noqa: BLE001  # re-raised in the test's thread
            failure.append(error)

    sender = threading.Thread(target=stream, name="http-sender", daemon=True)
    sender.start()
    settled: set[str] = set()
    left_with_victim: dict[str, float] = {}
    copies: list[Delivery] = []
    struck_at = 0.0
    try:
        with client() as http:
            deadline = time.monotonic() + timeout_s
            while sender.is_alive() or settled != set(sent):
                assert not failure, f"sending failed: {failure[0]!r}"
                assert time.monotonic() < deadline, f"settled {len(settled)} of {len(sent)} in {timeout_s} s"
                got = receive(http, visibility_ms)
                left = [d for d in got if d.redelivery_count == 0 and _left_unacknowledged(d.value)]
                if not struck.is_set():
                    left_with_victim.update(
                        (d.value, time.monotonic()) for d in left if d.partition in victims_partitions
                    )
                done = [d for d in got if d not in left]
                ack(http, done)
                copies += [d for d in done if d.redelivery_count > 0]
                # only the stream's values: a late copy of an earlier test's message is acknowledged, not counted
                settled |= {d.value for d in done if d.value.startswith("s")}
                if not struck.is_set() and left_with_victim and len(settled) >= batches * per_batch // 4:
                    strike()
                    struck_at = time.monotonic()
                    struck.set()
    finally:
        struck.set()
        sender.join(30)
    assert not failure, f"sending failed: {failure[0]!r}"
    assert len(sent) == batches * per_batch
    return Disrupted(sent, settled, left_with_victim, copies, struck_at)


def _left_unacknowledged(value: str) -> bool:
    """All of the first batch (spread over the partitions) and every tenth message after it."""
    return value.startswith("s0-") or value.endswith("-0")
