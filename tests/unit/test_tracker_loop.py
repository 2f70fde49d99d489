"""The service loop without Kafka: what it redelivers, how it paces and backs off, and how long it waits."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from kmq.config import KmqConfig
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq_tracker.config import TrackerConfig
from kmq_tracker.ingest import MarkersIngest, now_ms
from kmq_tracker.loop import Loop
from kmq_tracker.metrics import TrackerMetrics
from kmq_tracker.pacing import Backoff
from kmq_tracker.partition import PartitionState
from kmq_tracker.redeliverer import Redelivered
from kmq_tracker.workers import Finished, Pass, RedeliveryPool

KMQ = KmqConfig(bootstrap_servers="unused:9092", queue_topic="q")


@dataclass
class FakeIngest:
    partitions: dict[int, PartitionState] = field(default_factory=dict)
    waits_s: list[float] = field(default_factory=list)
    commits: int = 0

    def poll(self, timeout_s: float) -> int:
        self.waits_s.append(timeout_s)
        return 0

    def commit(self) -> None:
        self.commits += 1


@dataclass
class FakeRedeliverer:
    """Settles each offset as `outcome(offset)` says: copied, dead, missing or failed."""

    outcome: Any = lambda offset: "copied"
    calls: list[tuple[int, list[int]]] = field(default_factory=list)

    def redeliver(self, partition: int, offsets: Sequence[int]) -> Redelivered:
        self.calls.append((partition, list(offsets)))
        result = Redelivered()
        for offset in offsets:
            kind = self.outcome(offset)
            {"copied": result.copied, "dead": result.dead_lettered, "missing": result.missing, "failed": result.failed}[
                kind
            ].append(offset)
        if result.failed:
            result.errors.append("broker said no")
        return result

    def close(self) -> None:
        pass


@dataclass
class SyncPool:
    """`RedeliveryPool`'s interface, running each pass at once on the caller's thread."""

    redeliverer: FakeRedeliverer
    running: dict[int, Pass] = field(default_factory=dict)
    finished: list[Finished] = field(default_factory=list)

    def can_take(self) -> bool:
        return True

    def busy(self, partition: int) -> bool:
        return partition in self.running

    def submit(self, state: PartitionState, offsets: Sequence[int]) -> None:
        job = Pass(state, offsets, state.deadlines_of(offsets), now_ms())
        self.finished.append(Finished(job, self.redeliverer.redeliver(state.partition, offsets), None, now_ms()))

    def completed(self) -> list[Finished]:
        done, self.finished = self.finished, []
        return done

    def wait_for(self, partitions: Collection[int]) -> list[Finished]:
        return self.completed()


def caught_up(partition: int, starts: dict[int, int]) -> PartitionState:
    """A caught-up partition with one START per queue offset, due at the given deadline."""
    state = PartitionState("q__markers", partition, Backoff(100, 1_000))
    state.reached_end(0)
    for marker_offset, (queue_offset, deadline_ms) in enumerate(starts.items()):
        key, value = MarkerKey(partition, queue_offset).encode(), StartMarker(0).encode()
        state.apply(marker_offset, deadline_ms, key, value)
    return state


def loop(ingest: FakeIngest, redeliverer: FakeRedeliverer, **settings: Any) -> tuple[Loop, TrackerMetrics]:
    metrics = TrackerMetrics()
    config = TrackerConfig(kmq=KMQ, **settings)
    pool = cast(RedeliveryPool, SyncPool(redeliverer))
    return Loop(config, metrics, cast(MarkersIngest, ingest), pool), metrics


def test_due_messages_are_redelivered_then_forgotten() -> None:
    past = now_ms() - 1_000
    ingest = FakeIngest({0: caught_up(0, {5: past, 6: past, 7: past + 10**9})})
    redeliverer = FakeRedeliverer()
    turn, metrics = loop(ingest, redeliverer)
    turn.turn()
    assert redeliverer.calls == [(0, [5, 6])]
    assert 5 not in ingest.partitions[0].pending
    assert 7 in ingest.partitions[0].pending
    assert metrics.value("kmq_redeliveries_total") == 2
    assert metrics.value("kmq_redelivery_lateness_seconds_count") == 2
    assert metrics.value("kmq_redelivery_lateness_seconds_sum") >= 2 * 1.0


def test_dead_letters_and_missing_messages_are_counted_and_forgotten() -> None:
    past = now_ms() - 1
    ingest = FakeIngest({0: caught_up(0, {1: past, 2: past})})
    turn, metrics = loop(ingest, FakeRedeliverer(lambda offset: "dead" if offset == 1 else "missing"))
    turn.turn()
    assert len(ingest.partitions[0].pending) == 0
    assert metrics.value("kmq_dead_letters_total") == 1
    assert metrics.value("kmq_missing_messages_total") == 1
    assert metrics.value("kmq_redeliveries_total") == 0


def test_a_failed_redelivery_stays_pending_and_backs_off() -> None:
    past = now_ms() - 1
    ingest = FakeIngest({0: caught_up(0, {1: past, 2: past})})
    redeliverer = FakeRedeliverer(lambda offset: "failed" if offset == 2 else "copied")
    turn, metrics = loop(ingest, redeliverer, retry_backoff_ms=60_000, retry_backoff_max_ms=60_000)
    turn.turn()
    turn.turn()
    assert redeliverer.calls == [(0, [1, 2])]  # the second turn is inside the backoff
    assert list(ingest.partitions[0].pending.due(now_ms(), 10)) == [2]
    assert metrics.value("kmq_redelivery_errors_total") == 1


def test_the_rate_limit_holds_redeliveries_back() -> None:
    past = now_ms() - 1
    ingest = FakeIngest({0: caught_up(0, dict.fromkeys(range(10), past))})
    redeliverer = FakeRedeliverer()
    turn, _ = loop(ingest, redeliverer, redelivery_rate_per_s=0.001, max_in_flight=3)
    turn.turn()
    turn.turn()
    assert redeliverer.calls == [(0, [0, 1, 2])]
    assert len(ingest.partitions[0].pending) == 7


def test_the_most_overdue_partition_goes_first() -> None:
    now = now_ms()
    ingest = FakeIngest({0: caught_up(0, {1: now - 10}), 1: caught_up(1, {1: now - 5_000})})
    redeliverer = FakeRedeliverer()
    turn, _ = loop(ingest, redeliverer, redelivery_rate_per_s=0.001, max_in_flight=1)
    turn.turn()
    assert redeliverer.calls == [(1, [1])]


def test_the_wait_ends_at_the_earliest_deadline() -> None:
    ingest = FakeIngest({0: caught_up(0, {1: now_ms() + 40})})
    turn, _ = loop(ingest, FakeRedeliverer(), max_wait_ms=1_000, commit_interval_ms=60_000)
    turn.turn()
    assert 0 <= ingest.waits_s[0] <= 0.041


def test_without_deadlines_the_wait_is_capped() -> None:
    ingest = FakeIngest({0: caught_up(0, {})})
    turn, _ = loop(ingest, FakeRedeliverer(), max_wait_ms=80, commit_interval_ms=60_000)
    turn.turn()
    assert 0.07 <= ingest.waits_s[0] <= 0.08


def test_a_partition_still_catching_up_neither_wakes_nor_redelivers() -> None:
    state = PartitionState("q__markers", 0, Backoff(100, 1_000))
    state.apply(0, now_ms() - 1_000, MarkerKey(0, 1).encode(), StartMarker(0).encode())
    ingest = FakeIngest({0: state})
    redeliverer = FakeRedeliverer()
    turn, _ = loop(ingest, redeliverer, max_wait_ms=50, commit_interval_ms=60_000)
    turn.turn()
    assert redeliverer.calls == []
    assert ingest.waits_s[0] >= 0.04


def test_commits_follow_the_interval() -> None:
    ingest = FakeIngest()
    turn, _ = loop(ingest, FakeRedeliverer(), commit_interval_ms=60_000, max_wait_ms=1)
    turn.turn()
    assert ingest.commits == 0


def test_gauges_report_each_owned_partition() -> None:
    ingest = FakeIngest({3: caught_up(3, {1: now_ms() + 10**9})})
    turn, metrics = loop(ingest, FakeRedeliverer())
    turn.turn()
    labels = {"topic": "q__markers", "partition": "3"}
    assert metrics.value("kmq_pending_messages", labels) == 1
    assert metrics.value("kmq_partition_caught_up", labels) == 1


@dataclass
class HeldPool(SyncPool):
    """A pool whose passes run, but finish only when the test says so."""

    held: list[Finished] = field(default_factory=list)

    def submit(self, state: PartitionState, offsets: Sequence[int]) -> None:
        super().submit(state, offsets)
        self.running[state.partition] = self.finished[-1].job
        self.held, self.finished = self.held + self.finished, []

    def release(self) -> None:
        self.finished, self.held = self.held, []
        self.running.clear()


def test_a_pass_whose_ends_are_read_back_before_it_settles_shows_as_redelivering() -> None:
    # given a pass of two due messages that is still running
    past = now_ms() - 1
    ingest = FakeIngest({0: caught_up(0, {5: past, 6: past})})
    pool = HeldPool(FakeRedeliverer())
    metrics = TrackerMetrics()
    turn = Loop(TrackerConfig(kmq=KMQ), metrics, cast(MarkersIngest, ingest), cast(RedeliveryPool, pool))
    turn.turn()
    state = ingest.partitions[0]
    # when the ENDs it wrote for the originals are read back before the loop settles it
    for marker_offset, queue_offset in enumerate((5, 6), start=2):
        state.apply(marker_offset, now_ms(), MarkerKey(0, queue_offset).encode(), EndMarker().encode())
    # then nothing is pending, but the status says two messages are being redelivered, and none is counted yet
    assert (state.status().pending, state.status().redelivering) == (0, 2)
    assert metrics.value("kmq_redeliveries_total") == 0
    # and once the pass is settled, both are counted and nothing is being redelivered
    pool.release()
    turn.turn()
    assert (state.status().pending, state.status().redelivering) == (0, 0)
    assert metrics.value("kmq_redeliveries_total") == 2
