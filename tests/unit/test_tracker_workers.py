"""The redelivery pool (issue 15, item 3): a partition whose pass hangs on the broker holds up no other partition,
never has two passes at once, and is waited for before it is given up."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import cast

import pytest

from kmq.config import KmqConfig
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq_tracker.config import TrackerConfig
from kmq_tracker.ingest import MarkersIngest, now_ms
from kmq_tracker.loop import Loop
from kmq_tracker.metrics import TrackerMetrics
from kmq_tracker.pacing import Backoff
from kmq_tracker.partition import PartitionState
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


class ProbedRedeliverer:
    """Copies everything; a probe of the markers partition's end finds `end` (None: no answer)."""

    def __init__(self, end: int | None) -> None:
        self.end = end
        self.calls: list[list[int]] = []
        self.probes: list[int] = []

    def markers_end(self, partition: int, near: int) -> int | None:
        self.probes.append(near)
        return self.end

    def redeliver(self, partition: int, offsets: Sequence[int]) -> Redelivered:
        self.calls.append(list(offsets))
        return Redelivered(copied=list(offsets))

    def warm_up(self) -> None:
        pass

    def close(self) -> None:
        pass


def stale_end_loop(end: int | None) -> tuple[Loop, PartitionState, RedeliveryPool, ProbedRedeliverer]:
    """Offset 1 due by a marker read (stamped past its deadline), offset 2 due only by the cached end."""
    now = now_ms()
    state = PartitionState("q__markers", 0, Backoff(100, 1_000))
    state.reached_end(0)
    state.apply(0, now - 2_000, MarkerKey(0, 1).encode(), StartMarker(0).encode())
    state.apply(1, now - 1_500, MarkerKey(0, 2).encode(), StartMarker(1_000).encode())
    state.observe_position(high_watermark=2)
    redeliverer = ProbedRedeliverer(end)
    pool = RedeliveryPool(CONFIG, 1, lambda config: cast(Redeliverer, redeliverer))
    ingest = FakeIngest({0: state})
    return Loop(CONFIG, TrackerMetrics(), cast(MarkersIngest, ingest), pool), state, pool, redeliverer


def test_a_pass_due_by_a_cached_end_copies_what_markers_vouch_for_until_the_end_found_is_read() -> None:
    loop, state, pool, redeliverer = stale_end_loop(end=5)
    try:
        # when the loop turns while a probe finds markers up to 5, read up to 2
        turn_until(loop, lambda: len(redeliverer.calls) == 1 and 1 not in state.pending, "the first pass")
        # then the pass probed at the position read and copied only offset 1; offset 2 waits, with no second probe
        assert (redeliverer.probes, redeliverer.calls, state.awaited is not None) == ([2], [[1]], True)
        for _ in range(5):
            loop.turn()
        assert redeliverer.probes == [2] and 2 in state.pending
        # and once the markers up to 5 are read (no END among them), offset 2 is due without another probe
        for offset in (2, 3, 4):
            state.apply(offset, 0, MarkerKey(0, 100 + offset).encode(), EndMarker().encode())
        turn_until(loop, lambda: 2 not in state.pending, "offset 2 copied")
        assert (redeliverer.probes, redeliverer.calls) == ([2], [[1], [2]])
    finally:
        loop.drain()
        pool.close()


def test_a_probe_without_an_answer_backs_the_partition_off() -> None:
    loop, state, pool, redeliverer = stale_end_loop(end=None)
    try:
        turn_until(loop, lambda: len(redeliverer.probes) == 1 and not pool.running, "the first pass")
        assert redeliverer.calls == [[1]] and 2 in state.pending
        assert state.backoff.failures == 1 and state.awaited is None
    finally:
        loop.drain()
        pool.close()
