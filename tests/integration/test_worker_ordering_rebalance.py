"""Key-ordered workers on a real broker, through a rebalance: the worker that loses partitions drops their waiting
messages (the tracker redelivers them to the new owner), lets its running handlers finish, and starts nothing it
held of them afterwards; nothing is lost, and the new owner handles each key's messages in offset order."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from typing import NamedTuple

import pytest

from kmq.config import KmqConfig
from kmq.message import Message
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.worker import Worker, WorkerConfig
from tests.helpers import wait_for
from tests.integration.test_tracker_e2e import running_tracker
from tests.integration.test_worker_ordering import MakeConfig, parse, running

pytestmark = pytest.mark.integration
FIRST = 6  # messages per key sent before the rebalance
LATER = 4  # and after it


def send(config: KmqConfig, keys: list[str], seqs: range, partition: int) -> None:
    """Messages `key:seq`, interleaved by key, to one partition."""
    with KmqProducer(config) as producer:
        producer.send_batch(
            OutgoingMessage(f"{key}:{seq}".encode(), key.encode(), None, partition) for seq in seqs for key in keys
        )


class Start(NamedTuple):
    worker: str
    at: float
    partition: int
    key: str
    seq: int
    copy: bool  # a redelivered copy


class Starts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.starts: list[Start] = []
        self.done: set[tuple[str, int]] = set()

    def begin(self, worker: str, msg: Message) -> None:
        key, seq = parse(msg)
        with self.lock:
            self.starts.append(Start(worker, time.monotonic(), msg.partition, key, seq, msg.redelivery_count > 0))

    def end(self, msg: Message) -> None:
        with self.lock:
            self.done.add(parse(msg))

    def of(self, worker: str) -> list[Start]:
        with self.lock:
            return [start for start in self.starts if start.worker == worker]


@pytest.mark.parametrize("kind", ["threads", "asyncio"])
def test_a_revoked_worker_starts_none_of_its_waiting_messages_and_nothing_is_lost(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # given 4 keys on each of 2 partitions, 6 messages each, all received by worker A, whose handlers hold the first
    # message of every key (its 8 handlers busy) while the other 40 wait behind them
    config = make_config(partitions=2, msg_timeout_ms=4000)
    keys = {partition: [f"p{partition}k{i}" for i in range(4)] for partition in (0, 1)}
    for partition, of_partition in keys.items():
        send(config, of_partition, range(FIRST), partition)
    starts, release = Starts(), threading.Event()

    def handler(name: str, hold: bool) -> object:
        def handle(msg: Message) -> None:
            starts.begin(name, msg)
            if hold:
                assert release.wait(30), "never released"
            starts.end(msg)

        async def handle_async(msg: Message) -> None:
            starts.begin(name, msg)
            if hold:
                assert await asyncio.to_thread(release.wait, 30), "never released"
            starts.end(msg)

        return handle if kind == "threads" else handle_async

    # room for all 48 and more: a worker with no room to receive does not poll, so it would not serve the rebalance
    settings = WorkerConfig(concurrency=8, ordering="key", prefetch=100)
    worker_a = Worker(handler("A", True), config, settings=settings)
    worker_b = Worker(handler("B", False), config, settings=settings)
    gate = worker_a.core.gate
    assert gate is not None
    revocations: list[tuple[float, set[int], int]] = []
    revoke = gate.revoked

    def revoked_recorded(partitions: set[int]) -> list[Message]:
        dropped = revoke(partitions)
        revocations.append((time.monotonic(), partitions, len(dropped)))  # once the revocation returned
        return dropped

    monkeypatch.setattr(gate, "revoked", revoked_recorded)

    def held_by_a() -> int:
        with worker_a.core.lock:
            return sum(gate.lanes.held.values())

    with running_tracker(config), running(worker_a):
        wait_for(lambda: len(starts.of("A")) == 8 and held_by_a() == 48, 30, what="A holding all, 8 running")
        # when worker B joins the group and the rebalance takes partitions from A, more messages are sent, and A's
        # running handlers finish
        with running(worker_b):
            wait_for(lambda: revocations, 30, what="A's revocation")
            revoked_at, revoked, dropped = revocations[0]
            for partition, of_partition in keys.items():
                send(config, of_partition, range(FIRST, FIRST + LATER), partition)
            release.set()
            everything = {(key, seq) for of_partition in keys.values() for key in of_partition for seq in range(10)}
            wait_for(lambda: everything <= starts.done, 45, interval_s=0.2, what="every message handled")
    # then A dropped what waited of the revoked partitions and started none of it after the revocation returned
    a_after = [s for s in starts.of("A") if s.at > revoked_at]
    assert [s for s in a_after if not s.copy and s.seq < FIRST] == []
    assert dropped == sum(FIRST - 1 for partition in revoked for _ in keys[partition]), (revoked, dropped)
    # and no partition was worked on by both once the group settled
    b_partitions = {s.partition for s in starts.of("B")}
    assert b_partitions and not b_partitions & {s.partition for s in a_after}
    # and nothing was lost (above), and each owner handled every key's messages sent after the rebalance in offset
    # order; only the redelivered copies of the dropped messages come back behind them (docs/guides/ordering.md)
    order: defaultdict[tuple[str, str], list[int]] = defaultdict(list)
    for s in sorted(starts.of("A") + starts.of("B"), key=lambda s: s.at):
        if s.at > revoked_at and not s.copy and s.seq >= FIRST:
            order[(s.worker, s.key)].append(s.seq)
    assert {lane: seqs for lane, seqs in order.items() if seqs != sorted(seqs)} == {}
    assert {key for _, key in order} == {key for of_partition in keys.values() for key in of_partition}
    print(f"{kind}: revoked {sorted(revoked)}, {dropped} dropped; A started {len(a_after)} after, all copies or new")
