"""PendingSet scenarios, given/when/then, after kmq's MarkersQueueTest."""

from __future__ import annotations

import pytest

from kmq_tracker.pending import PendingSet

_TIMEOUT_MS = 30_000
_INT64_MAX = 2**63 - 1


def _given_starts(*starts: tuple[int, int, int]) -> PendingSet:
    pending = PendingSet()
    for queue_offset, marker_offset, deadline_ms in starts:
        pending.start(queue_offset, marker_offset, deadline_ms)
    return pending


def test_a_start_then_its_end_is_not_due() -> None:
    pending = _given_starts((10, 0, 1_000 + _TIMEOUT_MS))

    was_pending = pending.end(10)

    assert was_pending
    assert pending.due(now_ms=10**12, limit=100) == []
    assert len(pending) == 0
    assert 10 not in pending
    assert pending.next_deadline_ms() is None


def test_a_start_is_due_from_its_deadline_on() -> None:
    pending = _given_starts((10, 0, 31_000))

    assert pending.due(now_ms=30_999, limit=100) == []
    assert pending.due(now_ms=31_000, limit=100) == [10]
    assert pending.due(now_ms=99_000, limit=100) == [10]


def test_due_does_not_remove() -> None:
    pending = _given_starts((10, 0, 5), (11, 1, 6))

    pending.due(now_ms=100, limit=100)

    assert pending.due(now_ms=100, limit=100) == [10, 11]
    assert len(pending) == 2


def test_extend_moves_the_deadline_and_voids_the_earlier_start() -> None:
    pending = _given_starts((10, 0, 31_000))

    pending.start(10, 5, 61_000)  # extend: a later START for the same key

    assert pending.due(now_ms=40_000, limit=100) == []
    assert pending.due(now_ms=61_000, limit=100) == [10]
    assert pending.deadline_of(10) == 61_000
    assert len(pending) == 1
    assert pending.commit_offset(consumed_position=6) == 5


def test_an_extend_that_shortens_the_deadline_also_wins() -> None:
    pending = _given_starts((10, 0, 31_000))

    pending.start(10, 5, 2_000)

    assert pending.due(now_ms=2_000, limit=100) == [10]
    assert pending.deadline_of(10) == 2_000


def test_an_older_start_arriving_later_is_ignored() -> None:
    pending = _given_starts((10, 5, 61_000))

    pending.start(10, 3, 1_000)
    pending.start(10, 5, 1_000)  # the same marker read twice changes nothing either

    assert pending.deadline_of(10) == 61_000
    assert pending.due(now_ms=50_000, limit=100) == []
    assert pending.commit_offset(consumed_position=6) == 5


def test_nack_with_zero_delay_is_due_at_once() -> None:
    record_timestamp_ms = 1_000
    pending = _given_starts((10, 0, record_timestamp_ms + _TIMEOUT_MS))

    pending.start(10, 1, record_timestamp_ms + 0)

    assert pending.due(now_ms=record_timestamp_ms, limit=100) == [10]


def test_due_is_ordered_by_deadline_then_marker_offset() -> None:
    pending = _given_starts((30, 4, 2_000), (10, 3, 1_000), (20, 1, 2_000), (40, 2, 1_000), (50, 0, 3_000))

    assert pending.due(now_ms=2_500, limit=100) == [40, 10, 20, 30]
    assert pending.next_deadline_ms() == 1_000


def test_due_respects_limit() -> None:
    pending = _given_starts(*((offset, offset, 1_000 + offset) for offset in range(10)))

    assert pending.due(now_ms=10_000, limit=3) == [0, 1, 2]
    assert pending.due(now_ms=10_000, limit=0) == []
    assert pending.due(now_ms=10_000, limit=-1) == []
    assert pending.due(now_ms=1_004, limit=100) == [0, 1, 2, 3, 4]


def test_commit_offset_is_the_smallest_pending_marker_offset() -> None:
    pending = _given_starts((10, 7, 9_000), (11, 8, 1_000), (12, 9, 5_000))

    assert pending.commit_offset(consumed_position=12) == 7

    pending.end(10)

    assert pending.commit_offset(consumed_position=13) == 8


def test_commit_offset_is_the_consumed_position_when_nothing_pends() -> None:
    pending = _given_starts((10, 7, 9_000))
    assert PendingSet().commit_offset(consumed_position=42) == 42

    pending.end(10)

    assert pending.commit_offset(consumed_position=9) == 9


def test_an_extend_releases_the_commit_offset_of_the_voided_start() -> None:
    pending = _given_starts((10, 0, 31_000), (11, 1, 31_000))

    pending.start(10, 2, 61_000)

    assert pending.commit_offset(consumed_position=3) == 1


def test_an_end_for_an_unknown_key_is_harmless() -> None:
    pending = _given_starts((10, 0, 1_000))

    was_pending = pending.end(99)

    assert not was_pending
    assert len(pending) == 1
    assert pending.due(now_ms=1_000, limit=100) == [10]
    assert not PendingSet().end(10)


def test_a_second_end_is_harmless() -> None:
    pending = _given_starts((10, 0, 1_000))
    pending.end(10)

    assert not pending.end(10)
    assert len(pending) == 0


def test_a_redelivered_copy_is_a_new_key() -> None:
    pending = _given_starts((10, 0, 1_000))

    # The tracker copies offset 10 to offset 25 of the queue, ENDs 10, and the client STARTs the copy.
    pending.end(10)
    pending.start(25, 3, 40_000)

    assert pending.due(now_ms=1_000, limit=100) == []
    assert pending.deadline_of(25) == 40_000
    assert pending.deadline_of(10) is None


def test_oldest_deadline_is_that_of_the_smallest_marker_offset() -> None:
    pending = _given_starts((10, 3, 9_000), (11, 4, 1_000))

    assert pending.oldest_deadline_ms() == 9_000
    assert pending.next_deadline_ms() == 1_000

    pending.end(10)

    assert pending.oldest_deadline_ms() == 1_000
    assert PendingSet().oldest_deadline_ms() is None


def test_membership_and_size() -> None:
    pending = _given_starts((10, 0, 1_000), (11, 1, 1_000))

    assert 10 in pending
    assert 12 not in pending
    assert "10" not in pending
    assert len(pending) == 2
    assert "pending=2" in repr(pending)


def test_a_deadline_beyond_int64_saturates() -> None:
    pending = _given_starts((10, 0, 2**64), (11, 1, -(2**64)))

    assert pending.deadline_of(10) == _INT64_MAX
    assert pending.due(now_ms=10**15, limit=100) == [11]


def test_an_offset_beyond_int64_is_refused_and_changes_nothing() -> None:
    pending = _given_starts((10, 0, 1_000))

    with pytest.raises(ValueError, match="int64"):
        pending.start(2**63, 1, 2_000)
    with pytest.raises(ValueError, match="int64"):
        pending.start(10, 2**63, 2_000)

    assert len(pending) == 1
    assert pending.deadline_of(10) == 1_000
    assert 2**63 not in pending


def test_many_entries_across_chunks() -> None:
    pending = PendingSet(chunk_rows=8)
    for offset in range(1_000):
        pending.start(offset, offset, 1_000 + offset % 17)

    for offset in range(0, 1_000, 2):
        assert pending.end(offset)

    due = pending.due(now_ms=1_003, limit=1_000)
    assert due == sorted((o for o in range(1, 1_000, 2) if o % 17 <= 3), key=lambda o: (o % 17, o))
    assert pending.commit_offset(consumed_position=1_000) == 1
    assert len(pending) == 500
