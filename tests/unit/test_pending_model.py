"""PendingSet against a naive dict model: every method is checked after every step (hypothesis state machine)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kmq_tracker.pending import PendingSet

# Few keys, markers and deadlines, so that replacements, ties and stale STARTs are frequent.
_KEYS = st.integers(min_value=0, max_value=24)
_MARKERS = st.integers(min_value=0, max_value=60)
_DEADLINES = st.integers(min_value=0, max_value=12)
_NOW = st.integers(min_value=-1, max_value=13)


class PendingSetModel(RuleBasedStateMachine):
    """The model: queue offset -> (marker offset, deadline) of the START with the highest marker offset."""

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[int, tuple[int, int]] = {}
        self.pending = PendingSet()
        self.next_marker = 0

    @initialize(chunk_rows=st.integers(min_value=2, max_value=6))
    def small_chunks(self, chunk_rows: int) -> None:
        # Tiny chunks make every few steps split or merge one.
        self.pending = PendingSet(chunk_rows=chunk_rows)

    @rule(queue_offset=_KEYS, deadline_ms=_DEADLINES)
    def start_in_kafka_order(self, queue_offset: int, deadline_ms: int) -> None:
        self._start(queue_offset, self.next_marker, deadline_ms)
        self.next_marker += 1

    @rule(queue_offset=_KEYS, marker_offset=_MARKERS, deadline_ms=_DEADLINES)
    def start_with_any_marker_offset(self, queue_offset: int, marker_offset: int, deadline_ms: int) -> None:
        self._start(queue_offset, marker_offset, deadline_ms)

    @rule(queue_offset=_KEYS)
    def end(self, queue_offset: int) -> None:
        assert self.pending.end(queue_offset) == (self.model.pop(queue_offset, None) is not None)

    @rule(now_ms=_NOW, limit=st.integers(min_value=-1, max_value=30))
    def due(self, now_ms: int, limit: int) -> None:
        assert self.pending.due(now_ms, limit) == self._due(now_ms)[: max(limit, 0)]

    @rule(data=st.data())
    def end_everything_due(self, data: st.DataObject) -> None:
        # What the redeliverer does: take what is due, END each one.
        now_ms = data.draw(_NOW)
        for queue_offset in self.pending.due(now_ms, 1_000):
            assert self.pending.end(queue_offset)
            del self.model[queue_offset]

    @invariant()
    def same_size_and_members(self) -> None:
        assert len(self.pending) == len(self.model)
        for queue_offset in range(-1, 26):
            assert (queue_offset in self.pending) == (queue_offset in self.model)
            entry = self.model.get(queue_offset)
            assert self.pending.deadline_of(queue_offset) == (None if entry is None else entry[1])

    @invariant()
    def same_due(self) -> None:
        for now_ms in (-1, 0, 5, 12):
            assert self.pending.due(now_ms, 1_000) == self._due(now_ms)

    @invariant()
    def same_deadlines(self) -> None:
        entries = self.model.values()
        assert self.pending.next_deadline_ms() == min((d for _, d in entries), default=None)
        assert self.pending.oldest_deadline_ms() == (min(entries)[1] if entries else None)

    @invariant()
    def same_commit_offset(self) -> None:
        smallest = min((m for m, _ in self.model.values()), default=None)
        assert self.pending.commit_offset(1_000) == (1_000 if smallest is None else smallest)

    def _start(self, queue_offset: int, marker_offset: int, deadline_ms: int) -> None:
        self.pending.start(queue_offset, marker_offset, deadline_ms)
        current = self.model.get(queue_offset)
        if current is None or current[0] < marker_offset:
            self.model[queue_offset] = (marker_offset, deadline_ms)

    def _due(self, now_ms: int) -> list[int]:
        # Ordered by (deadline, marker offset); equal pairs (impossible in Kafka) by queue offset.
        due = [(d, m, q) for q, (m, d) in self.model.items() if d <= now_ms]
        return [q for _, _, q in sorted(due)]


PendingSetModel.TestCase.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)
TestPendingSetModel = PendingSetModel.TestCase
