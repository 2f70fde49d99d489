"""The tracker applies the facade's settle-once rule (kmq.receipt_notes): a START or END whose `kmq-receipt` note lost
to an earlier settle of the same delivery or receipt is ignored, as the facade answered 409 to its writer."""

from __future__ import annotations

from kmq.batch_markers import BatchEnd, BatchStart
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq.receipt_notes import Note
from kmq_tracker.pacing import Backoff
from kmq_tracker.partition import PartitionState

P = 2
ISSUED, DEADLINE = 100, 30_000  # the delivery's issue time and its receipt's deadline


def caught_up() -> PartitionState:
    s = PartitionState("q__markers", P, Backoff(100, 1_000))
    s.reached_end(0)
    return s


def started(s: PartitionState, queue_offset: int) -> None:
    """The delivery's START, as the facade's receive writes it (no note)."""
    assert s.apply(0, 0, MarkerKey(P, queue_offset).encode(), StartMarker(DEADLINE).encode())


def ack(s: PartitionState, marker_offset: int, queue_offset: int) -> None:
    note = Note("ack", ISSUED, DEADLINE, DEADLINE).encode()
    assert s.apply_noted(marker_offset, 10, MarkerKey(P, queue_offset).encode(), EndMarker().encode(), note)


def nack(s: PartitionState, marker_offset: int, queue_offset: int) -> None:
    note = Note("nack", ISSUED, DEADLINE, DEADLINE).encode()
    assert s.apply_noted(marker_offset, 10, MarkerKey(P, queue_offset).encode(), StartMarker(0).encode(), note)


def test_a_nack_that_lost_to_an_ack_does_not_bring_the_message_back() -> None:
    s = caught_up()
    started(s, 5)
    ack(s, 7, 5)  # won: the message is done
    nack(s, 8, 5)  # lost: ignored
    assert 5 not in s.pending and s.due(100, 10) == [] and s.lost_settles == 1


def test_an_ack_that_lost_to_a_nack_does_not_cancel_the_redelivery() -> None:
    s = caught_up()
    started(s, 5)
    nack(s, 7, 5)  # won: redeliver at once
    ack(s, 8, 5)  # lost: its END is ignored
    assert s.due(100, 10) == [5] and s.lost_settles == 1


def test_a_batch_end_that_lost_on_some_offsets_ends_only_the_others() -> None:
    s = caught_up()
    assert s.apply(0, 0, MarkerKey(P, 10).encode(), BatchStart(DEADLINE, ((10, 3),)).encode())
    nack(s, 1, 11)  # 11 nacked first
    note = Note("ack", ISSUED, DEADLINE, DEADLINE).encode()
    assert s.apply_noted(2, 10, MarkerKey(P, 10).encode(), BatchEnd(((10, 3),)).encode(), note)
    assert [o for o in range(10, 13) if o in s.pending] == [11] and s.lost_settles == 1


def test_the_commit_does_not_pass_a_note_that_still_matters() -> None:
    s = caught_up()
    started(s, 5)
    ack(s, 7, 5)
    assert s.commit_offset() == 7  # a replica reading from here sees the ack, and judges a later nack by it
    s.forget_notes(DEADLINE + 10 * 60 * 1000 + 1)
    assert s.commit_offset() == 8
