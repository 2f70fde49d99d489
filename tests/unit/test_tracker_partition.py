"""PartitionState: applying markers, the catch-up guard, the commit offset and undecodable records."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmq.batch_markers import BatchEnd, BatchStart, runs_of
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq_tracker.pacing import Backoff
from kmq_tracker.partition import PartitionState

P = 2


def state(partition: int = P) -> PartitionState:
    return PartitionState("q__markers", partition, Backoff(100, 1_000))


def start(s: PartitionState, marker_offset: int, queue_offset: int, timestamp_ms: int, after_ms: int) -> bool:
    return s.apply(marker_offset, timestamp_ms, MarkerKey(P, queue_offset).encode(), StartMarker(after_ms).encode())


def end(s: PartitionState, marker_offset: int, queue_offset: int) -> bool:
    return s.apply(marker_offset, 0, MarkerKey(P, queue_offset).encode(), EndMarker().encode())


def caught_up_state() -> PartitionState:
    s = state()
    s.reached_end(0)
    return s


def test_deadline_is_marker_timestamp_plus_duration() -> None:
    # given a caught-up partition
    s = caught_up_state()
    # when a START written at t=1000 asks for redelivery after 500 ms
    start(s, 0, queue_offset=7, timestamp_ms=1_000, after_ms=500)
    # then it is due at 1500, not before
    assert s.due(1_499, 10) == []
    assert s.due(1_500, 10) == [7]
    assert s.next_wake_ms() == 1_500


def test_end_removes_the_key() -> None:
    s = caught_up_state()
    start(s, 0, 7, 1_000, 500)
    end(s, 1, 7)
    assert s.due(10_000, 10) == []
    assert len(s.pending) == 0
    assert s.next_wake_ms() is None


def test_extend_the_newest_start_wins() -> None:
    s = caught_up_state()
    start(s, 0, 7, 1_000, 500)
    start(s, 1, 7, 1_200, 5_000)  # extend(msg, 5000)
    assert s.due(2_000, 10) == []
    assert s.due(6_200, 10) == [7]


def test_due_is_ordered_by_deadline_and_limited() -> None:
    s = caught_up_state()
    start(s, 0, 1, 1_000, 900)
    start(s, 1, 2, 1_000, 100)
    start(s, 2, 3, 1_000, 500)
    assert s.due(5_000, 2) == [2, 3]


def test_nothing_is_due_before_catching_up_to_the_end_at_assignment() -> None:
    # given a freshly assigned partition whose first fetch saw a high watermark of 3
    s = state()
    start(s, 0, 7, 1_000, 0)
    s.observe_end(3)
    # when only part of the backlog has been read, then the START that is long due is held back
    assert not s.caught_up
    assert s.due(10_000, 10) == []
    assert s.next_wake_ms() is None
    # when the END that follows in the backlog is read, then the key was never due at all
    end(s, 1, 7)
    start(s, 2, 8, 1_000, 0)
    assert s.caught_up
    assert s.due(10_000, 10) == [8]


def test_end_of_partition_event_catches_up_at_once() -> None:
    s = state()
    start(s, 0, 7, 1_000, 0)
    assert s.due(10_000, 10) == []
    s.reached_end(1)
    assert s.caught_up
    assert s.due(10_000, 10) == [7]


def test_target_observed_after_reading_past_it_catches_up() -> None:
    s = state()
    start(s, 4, 7, 1_000, 0)
    s.observe_end(5)
    assert s.caught_up


def test_a_later_watermark_does_not_move_the_target() -> None:
    s = state()
    start(s, 0, 7, 1_000, 0)
    s.observe_end(2)
    s.observe_end(50)
    end(s, 1, 8)
    assert s.caught_up
    assert s.catch_up_target == 2


def test_unknown_watermark_is_ignored() -> None:
    s = state()
    start(s, 0, 7, 1_000, 0)
    s.observe_end(-1001)
    assert s.catch_up_target is None
    assert not s.caught_up


def test_commit_offset_is_the_oldest_pending_start_else_the_position() -> None:
    s = state()
    assert s.commit_offset() is None  # nothing read yet: nothing to commit
    start(s, 10, 1, 1_000, 500)
    start(s, 11, 2, 1_000, 500)
    assert s.commit_offset() == 10
    end(s, 12, 1)
    assert s.commit_offset() == 11
    end(s, 13, 2)
    assert s.commit_offset() == 14


def test_done_all_forgets_a_pass_of_singles_and_batch_entries_and_returns_their_deadlines() -> None:
    # given kmq STARTs for 7 and 9 and a BATCH START for 20-24
    s = caught_up_state()
    start(s, 0, 7, 1_000, 500)
    start(s, 1, 9, 1_000, 600)
    batch = BatchStart(700, runs_of(range(20, 25))).encode()
    s.apply(2, 1_000, MarkerKey(P, 20).encode(), batch)
    # when a pass settles 7, 9 and 21-22, and 30 that is not pending
    deadlines = s.done_all([7, 9, 21, 22, 30])
    # then it gets their deadlines, and only 20, 23 and 24 remain
    assert deadlines == [1_500, 1_600, 1_700, 1_700, None]
    assert sorted(s.pending.due(10_000, 100)) == [20, 23, 24]
    assert s.done_all([]) == []


def test_done_forgets_the_key_and_returns_its_deadline() -> None:
    s = caught_up_state()
    start(s, 0, 7, 1_000, 500)
    assert s.done(7) == 1_500
    assert s.done(7) is None
    assert s.commit_offset() == 1


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (None, b"\x00"),
        (MarkerKey(P, 1).encode(), None),
        (b"short", b"\x00"),
        (MarkerKey(P, 1).encode(), b"\x02"),
        (MarkerKey(P, 1).encode(), b"\x01\x00"),
        (MarkerKey(P + 1, 1).encode(), b"\x00"),  # a marker for another queue partition
    ],
)
def test_undecodable_records_are_skipped_and_counted(key: bytes | None, value: bytes | None) -> None:
    s = caught_up_state()
    assert not s.apply(5, 0, key, value)
    assert s.undecodable == 1
    assert len(s.pending) == 0
    assert s.position == 6  # skipped, not stuck: the commit moves past it


def test_undecodable_records_are_logged_once_per_partition(caplog: pytest.LogCaptureFixture) -> None:
    s = caught_up_state()
    with caplog.at_level(logging.WARNING, logger="kmq_tracker.partition"):
        for offset in range(5):
            s.apply(offset, 0, b"garbage", b"garbage")
    assert s.undecodable == 5
    assert len(caplog.records) == 1
    assert "q__markers[2]@0" in caplog.records[0].getMessage()


def test_backoff_holds_the_partition_back() -> None:
    s = caught_up_state()
    start(s, 0, 7, 1_000, 0)
    retry_at = s.backoff.failed(1_000)
    assert retry_at == 1_100
    assert s.due(1_050, 10) == []
    assert s.next_wake_ms() == 1_100
    assert s.due(1_100, 10) == [7]


def test_overdue_is_how_long_the_earliest_deadline_has_passed() -> None:
    s = caught_up_state()
    assert s.overdue_ms(5_000) == 0
    start(s, 0, 7, 1_000, 500)
    assert s.overdue_ms(1_000) == 0
    assert s.overdue_ms(2_000) == 500


_keys = st.one_of(
    st.none(),
    st.binary(max_size=16),
    st.builds(lambda p, o: MarkerKey(p, o).encode(), st.integers(P - 1, P + 1), st.integers(0, 2**63 - 1)),
)
_values = st.one_of(
    st.none(),
    st.binary(max_size=10),
    st.just(EndMarker().encode()),
    st.builds(lambda ms: StartMarker(ms).encode(), st.integers(-(2**40), 2**40)),
)


@given(records=st.lists(st.tuples(_keys, _values, st.integers(0, 2**41)), max_size=30))
def test_the_fast_path_agrees_with_the_marker_codec(records: list[tuple[bytes | None, bytes | None, int]]) -> None:
    fast, checked = caught_up_state(), caught_up_state()
    for offset, (key, value, timestamp_ms) in enumerate(records):
        assert fast.apply(offset, timestamp_ms, key, value) == checked._apply_checked(offset, timestamp_ms, key, value)
    assert fast.undecodable == checked.undecodable
    assert fast.position == checked.position
    assert fast.due(2**62, 100) == checked.due(2**62, 100)
    assert [fast.pending.deadline_of(o) for o in fast.due(2**62, 100)] == [
        checked.pending.deadline_of(o) for o in checked.due(2**62, 100)
    ]


def test_first_offset_is_where_reading_resumed() -> None:
    s = state()
    assert s.first_offset is None
    s.reached_end(40)  # an empty tail: nothing read
    assert s.first_offset is None
    start(s, 40, 7, 1_000, 0)
    end(s, 41, 7)
    assert s.first_offset == 40


def lagging_state() -> PartitionState:
    """Caught up once, then markers arrived faster than they were read: the last poll left it behind the end."""
    s = caught_up_state()
    s.observe_position(high_watermark=100)
    assert not s.at_end
    return s


def test_a_lagging_tracker_redelivers_nothing_past_what_it_has_read() -> None:
    # given a START due at 1500, read by a tracker that lags: its last marker read was stamped 1000
    s = lagging_state()
    start(s, 0, queue_offset=7, timestamp_ms=1_000, after_ms=500)
    # when the clock passes the deadline while the END (stamped 1400) is still unread
    # then it is not due, and the loop is not told to wake for it (the next records read move it on)
    assert s.due(5_000, 10) == []
    assert s.next_wake_ms() is None
    # and once the END is read, there is nothing to redeliver
    s.apply(1, 1_400, MarkerKey(P, 7).encode(), EndMarker().encode())
    assert s.due(5_000, 10) == [] and len(s.pending) == 0


def test_a_lagging_tracker_redelivers_once_it_has_read_past_the_deadline() -> None:
    s = lagging_state()
    start(s, 0, queue_offset=7, timestamp_ms=1_000, after_ms=500)
    start(s, 1, queue_offset=8, timestamp_ms=1_600, after_ms=500)  # read through 1600: 7 is settled either way
    assert s.due(5_000, 10) == [7]
    assert s.end_to_confirm(s.deadlines_of([7])) is None  # a marker read is stamped past its deadline
    s.observe_position(high_watermark=2)  # at the end now: deadlines are judged by the clock
    assert s.due(5_000, 10) == [7, 8]
    # 8's deadline (2100) lies past every marker read: the end, cached from some fetch, is confirmed before a copy
    assert s.end_to_confirm(s.deadlines_of([7, 8])) == 2


def test_an_end_that_may_be_stale_does_not_vouch_for_deadlines() -> None:
    # given a tracker at the end of its partition by the high watermark its consumer cached, after a START
    s = caught_up_state()
    start(s, 0, queue_offset=7, timestamp_ms=1_000, after_ms=500)
    s.observe_position(high_watermark=1)
    # when the clock passes the deadline with no marker read since (an END may be past a leader that stopped answering)
    # then the START is a candidate, but the pass must first confirm the end afresh; a later marker vouches for it
    assert s.due(5_000, 10) == [7]
    assert s.end_to_confirm(s.deadlines_of([7])) == 1
    s.apply(1, 1_600, MarkerKey(P, 8).encode(), EndMarker().encode())
    assert s.end_to_confirm(s.deadlines_of([7])) is None


def test_settled_counts_the_pending_starts_that_ends_settle_once_caught_up() -> None:
    # given a partition still catching up: an END read then was counted by the partition's previous owner
    s = state()
    s.observe_end(3)
    start(s, 0, 10, 0, 1_000)
    end(s, 1, 10)
    assert s.take_settled() == 0
    # when caught up: an END of a pending START, an END of nothing pending (the tracker's own, after a copy), and a
    # BATCH END over a batch of two offsets are read
    start(s, 2, 11, 0, 1_000)
    assert s.caught_up
    end(s, 3, 11)
    end(s, 4, 99)
    assert s.apply(5, 0, MarkerKey(P, 20).encode(), BatchStart(1_000, runs_of([20, 21])).encode())
    s.done_all([21])  # the tracker copied 21: its END is its own, not an acknowledgement
    assert s.apply(6, 0, MarkerKey(P, 20).encode(), BatchEnd(runs_of([20, 21])).encode())
    # then the deliveries settled are the START of 11 and the batch's 20, taken once
    assert s.take_settled() == 2
    assert s.take_settled() == 0


def test_the_trackers_own_ends_of_a_running_pass_are_not_counted_as_settled() -> None:
    # given a caught-up partition with a pass running over 7 and 8, and 9 pending outside it
    s = caught_up_state()
    for marker_offset, queue_offset in enumerate((7, 8, 9)):
        start(s, marker_offset, queue_offset, 0, 0)
    s.in_pass = frozenset({7, 8})
    # when the pass's END of 7 and its BATCH END of 8-9 are read back before the pass is settled (9 was acknowledged
    # meanwhile: the worker's END in the same run)
    end(s, 3, 7)
    assert s.apply(4, 0, MarkerKey(P, 8).encode(), BatchEnd(runs_of([8, 9])).encode())
    # then only 9 counts
    assert s.take_settled() == 1 and len(s.pending) == 0
