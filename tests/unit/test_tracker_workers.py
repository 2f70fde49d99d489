"""The redelivery pool (issue 15, item 3): a partition whose pass hangs on the broker holds up no other partition,
never has two passes at once, and is waited for before it is given up."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import cast

import pytest

from kmq.config import KmqConfig
from kmq_tracker.config import TrackerConfig
from kmq_tracker.ingest import MarkersIngest, now_ms
from kmq_tracker.loop import Loop
from kmq_tracker.metrics import TrackerMetrics
from kmq_tracker.redeliverer import Redelivered, Redeliverer
from kmq_tracker.workers import RedeliveryPool
from tests.helpers import wait_for
from tests.unit.test_tracker_loop import FakeIngest, caught_up

CONFIG = TrackerConfig(kmq=KmqConfig(bootstrap_servers="unused:9092", queue_topic="q"), max_wait_ms=10)
STALLED, HEALTHY = 0, 1


class GatedRedeliverer:
    """Copies everything; a pass over the `STALLED` partition first waits for `release` (a broker stuck on it)."""

    def __init__(self, release: threading.Event, calls: list[tuple[int, list[int]]]) -> None:
        self._release = release
        self._calls = calls

    def redeliver(self, partition: int, offsets: Sequence[int]) -> Redelivered:
        self._calls.append((partition, list(offsets)))
        if partition == STALLED:
            assert self._release.wait(30), "the test never released the stalled partition"
        return Redelivered(copied=list(offsets))

    def warm_up(self) -> None:
        pass

    def close(self) -> None:
        pass


def running_loop(size: int) -> tuple[Loop, FakeIngest, RedeliveryPool, threading.Event, list[tuple[int, list[int]]]]:
    past = now_ms() - 1_000
    ingest = FakeIngest({STALLED: caught_up(STALLED, {1: past, 2: past}), HEALTHY: caught_up(HEALTHY, {7: past})})
    release, calls = threading.Event(), []
    pool = RedeliveryPool(CONFIG, size, lambda config: cast(Redeliverer, GatedRedeliverer(release, calls)))
    return Loop(CONFIG, TrackerMetrics(), cast(MarkersIngest, ingest), pool), ingest, pool, release, calls


def turn_until(loop: Loop, condition: Callable[[], bool], what: str) -> None:
    def turned() -> bool:
        loop.turn()
        return condition()

    wait_for(turned, 10, interval_s=0.01, what=what)


def test_a_stalled_partition_holds_up_neither_the_others_nor_the_loop() -> None:
    loop, ingest, pool, release, calls = running_loop(size=2)
    try:
        # given a pass over partition 0 that hangs, when the loop turns
        turn_until(loop, lambda: len(ingest.partitions[HEALTHY].pending) == 0, "partition 1")
        # then partition 1 was redelivered meanwhile, and partition 0 got no second pass while its first runs
        assert 1 in ingest.partitions[STALLED].pending
        assert [c for c in calls if c[0] == STALLED] == [(STALLED, [1, 2])]
        assert pool.busy(STALLED)
        # and once the broker answers, partition 0 is settled too
        release.set()
        turn_until(loop, lambda: len(ingest.partitions[STALLED].pending) == 0, "partition 0")
    finally:
        release.set()
        loop.drain()
        pool.close()


def test_revocation_waits_for_the_partitions_running_pass_and_settles_it() -> None:
    loop, ingest, pool, release, _ = running_loop(size=2)
    try:
        loop.turn()
        assert pool.busy(STALLED)
        threading.Timer(0.2, release.set).start()  # the broker answers while the revocation waits
        loop.release([STALLED])
        assert not pool.busy(STALLED)
        assert len(ingest.partitions[STALLED].pending) == 0  # ENDed before its tail is committed
    finally:
        release.set()
        loop.drain()
        pool.close()


def test_one_worker_serves_the_partitions_in_turn() -> None:
    loop, ingest, pool, release, calls = running_loop(size=1)
    try:
        release.set()
        turn_until(loop, lambda: sum(len(s.pending) for s in ingest.partitions.values()) == 0, "all")
        assert sorted(calls) == [(STALLED, [1, 2]), (HEALTHY, [7])]
    finally:
        loop.drain()
        pool.close()


def test_a_worker_that_cannot_start_stops_those_already_started() -> None:
    release, calls = threading.Event(), []
    started: list[GatedRedeliverer] = []

    def factory(config: TrackerConfig) -> Redeliverer:
        if started:
            raise ValueError("bad setting")
        started.append(GatedRedeliverer(release, calls))
        return cast(Redeliverer, started[0])

    before = set(threading.enumerate())
    pool = RedeliveryPool(CONFIG, 2, factory)
    with pytest.raises(ValueError, match="bad setting"):
        pool.start()
    assert set(threading.enumerate()) <= before  # the first worker's thread was stopped
