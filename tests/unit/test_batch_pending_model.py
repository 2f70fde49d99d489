"""The range pending set (batch records as one entry each) against a model that expands every batch record into
per-offset kmq markers: same due sets, same redeliveries, same commit tail, on topics mixing both formats.

Given a markers partition read in order, when any mix of kmq START/END, BATCH START/END, redeliveries and time
passing is applied, then `PartitionState` (fed the encoded bytes) answers every question as a `PendingSet` fed one
kmq marker per offset.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kmq.batch_markers import BatchEnd, BatchStart, offsets_in, runs_of
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq_tracker.mixed_pending import MixedPending
from kmq_tracker.pacing import Backoff
from kmq_tracker.partition import PartitionState
from kmq_tracker.pending import PendingSet

_OFFSETS = st.integers(min_value=0, max_value=40)
_SETS = st.sets(_OFFSETS, min_size=1, max_size=25)
_DEADLINES = st.integers(min_value=0, max_value=12)
_NOW = st.integers(min_value=-1, max_value=13)
_PARTITION = 3


class RangePendingModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = PartitionState("q__markers", _PARTITION, Backoff(100, 1_000))
        self.state.reached_end(0)  # caught up: due() answers from the start
        self.model = PendingSet()
        self.marker = 0

    @initialize(chunk_rows=st.integers(min_value=2, max_value=6))
    def small_chunks(self, chunk_rows: int) -> None:
        # Tiny index chunks make every few steps split or merge one, under the runs and the kmq entries alike.
        pending = MixedPending(chunk_rows=chunk_rows)
        self.state = PartitionState("q__markers", _PARTITION, Backoff(100, 1_000), pending)
        self.state.reached_end(0)

    def _apply(self, first_offset: int, value: bytes) -> None:
        assert self.state.apply(self.marker, 0, MarkerKey(_PARTITION, first_offset).encode(), value)
        self.marker += 1

    @rule(offset=_OFFSETS, deadline_ms=_DEADLINES)
    def kmq_start(self, offset: int, deadline_ms: int) -> None:
        self.model.start(offset, self.marker, deadline_ms)
        self._apply(offset, StartMarker(deadline_ms).encode())

    @rule(offset=_OFFSETS)
    def kmq_end(self, offset: int) -> None:
        self.model.end(offset)
        self._apply(offset, EndMarker().encode())

    @rule(offsets=_SETS, deadline_ms=_DEADLINES)
    def batch_start(self, offsets: set[int], deadline_ms: int) -> None:
        for offset in offsets:
            self.model.start(offset, self.marker, deadline_ms)
        self._apply(min(offsets), BatchStart(deadline_ms, runs_of(offsets)).encode())

    @rule(offsets=_SETS)
    def batch_end(self, offsets: set[int]) -> None:
        for offset in offsets:
            self.model.end(offset)
        self._apply(min(offsets), BatchEnd(runs_of(offsets)).encode())

    @rule(now_ms=_NOW, limit=st.integers(min_value=-1, max_value=30))
    def due(self, now_ms: int, limit: int) -> None:
        assert self.state.due(now_ms, limit) == self.model.due(now_ms, limit)

    @rule(now_ms=_NOW, limit=st.integers(min_value=1, max_value=30))
    def redeliver_due(self, now_ms: int, limit: int) -> None:
        # What the tracker does: take what is due, copy it, then forget each settled offset.
        due = self.state.due(now_ms, limit)
        assert due == self.model.due(now_ms, limit)
        for offset in due:
            assert self.state.done(offset) == self.model.deadline_of(offset)
            self.model.end(offset)

    @rule(offsets=_SETS)
    def settle_some(self, offsets: set[int]) -> None:
        for offset in sorted(offsets):
            assert self.state.done(offset) == self.model.deadline_of(offset)
            self.model.end(offset)

    @invariant()
    def same_pending_set(self) -> None:
        pending = self.state.pending
        assert len(pending) == len(self.model)
        for offset in range(-1, 42):
            assert (offset in pending) == (offset in self.model)
            assert pending.deadline_of(offset) == self.model.deadline_of(offset)
        assert pending.next_deadline_ms() == self.model.next_deadline_ms()
        assert pending.oldest_deadline_ms() == self.model.oldest_deadline_ms()

    @invariant()
    def same_commit_tail(self) -> None:
        assert self.state.commit_offset() == self.model.commit_offset(self.marker)
        assert self.state.next_wake_ms() == self.model.next_deadline_ms()


RangePendingModel.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
TestRangePendingModel = RangePendingModel.TestCase


def test_a_batch_is_one_entry_whatever_its_size() -> None:
    state = PartitionState("q__markers", 0, Backoff(100, 1_000))
    state.apply(0, 1_000, MarkerKey(0, 0).encode(), BatchStart(500, ((0, 100_000),)).encode())
    state.apply(1, 1_000, MarkerKey(0, 0).encode(), BatchEnd(runs_of(range(0, 100_000, 2))).encode())
    assert len(state.pending) == 50_000
    assert state.pending.batches.groups() == 1
    state.reached_end(2)
    assert state.due(1_500, 3) == [1, 3, 5]
    assert list(offsets_in(((7, 2),))) == [7, 8]


def test_a_kmq_start_overrides_one_offset_of_a_batch() -> None:
    state = PartitionState("q__markers", 0, Backoff(100, 1_000))
    state.reached_end(0)
    state.apply(0, 0, MarkerKey(0, 10).encode(), BatchStart(100, ((10, 5),)).encode())
    state.apply(1, 0, MarkerKey(0, 12).encode(), StartMarker(5_000).encode())  # extend offset 12
    assert state.due(100, 10) == [10, 11, 13, 14]
    assert state.pending.deadline_of(12) == 5_000
    assert state.commit_offset() == 0
    state.apply(2, 0, MarkerKey(0, 10).encode(), BatchEnd(((10, 2), (13, 2))).encode())
    assert state.commit_offset() == 1  # the batch is gone, the extend is the oldest pending START
