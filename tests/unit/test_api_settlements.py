"""`Settlements`: which deliveries are settled, from the notes on the markers topic (given/when/then)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kmq.batch_markers import runs_of
from kmq_api.settle_view import resume_offsets
from kmq_api.settlements import RETAIN_MS, Note, Settlements


@given(st.sampled_from(["ack", "nack", "extend"]), st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1))
def test_a_note_round_trips(action: str, issued_at_ms: int, keep_until_ms: int) -> None:
    note = Note(action, issued_at_ms, keep_until_ms)  # type: ignore[arg-type]  # sampled from the Literal
    assert Note.decode(note.encode()) == note


def test_bytes_that_are_not_a_note_decode_to_none() -> None:
    assert Note.decode(None) is None
    assert Note.decode(b"") is None
    assert Note.decode(bytes([9]) + bytes(16)) is None  # unknown action
    assert Note.decode(Note("ack", 1, 2).encode() + b"x") is None


def test_ack_or_nack_settles_a_delivery_extend_does_not() -> None:
    settlements = Settlements()
    settlements.observe(0, 5, Note("extend", 100, 2_000), marker_offset=7)
    assert settlements.settled_by(0, 5, 100) is None
    settlements.observe(0, 5, Note("nack", 100, 1_000), marker_offset=9)
    settlements.observe(0, 5, Note("ack", 100, 1_000), marker_offset=11)
    assert settlements.settled_by(0, 5, 100) == "nack"  # the first settle is the one
    assert settlements.settled_by(0, 5, 101) is None  # another delivery of the same message
    assert settlements.settled_by(1, 5, 100) is None


def test_a_delivery_is_remembered_until_its_latest_deadline_has_passed() -> None:
    settlements = Settlements()
    settlements.observe(0, 5, Note("extend", 100, 5_000), marker_offset=7)
    settlements.observe(0, 5, Note("ack", 100, 1_000), marker_offset=9)  # acked with the older receipt
    assert settlements.prune(now_ms=5_000 + RETAIN_MS) == 0
    assert settlements.settled_by(0, 5, 100) == "ack"
    assert settlements.prune(now_ms=5_001 + RETAIN_MS) == 1
    assert len(settlements) == 0


def test_the_floor_is_the_first_marker_of_a_remembered_receive_per_partition() -> None:
    settlements = Settlements()
    assert settlements.floors() == {}
    settlements.observe(0, 5, Note("ack", 100, 1_000), marker_offset=9)
    settlements.observe(0, 6, Note("extend", 200, 9_000), marker_offset=12)  # another receive's delivery
    settlements.observe(1, 5, Note("ack", 100, 1_000), marker_offset=3)
    assert settlements.floors() == {0: 9, 1: 3}
    settlements.prune(now_ms=1_001 + RETAIN_MS)
    assert settlements.floors() == {0: 12}


def test_the_deliveries_of_one_receive_are_remembered_together_until_the_latest_note() -> None:
    # given two deliveries of one receive (issue time 100), one acked, the other extended to a later deadline
    settlements = Settlements()
    settlements.observe(0, 5, Note("ack", 100, 1_000), marker_offset=9)
    settlements.observe(0, 6, Note("extend", 100, 9_000), marker_offset=12)
    # then the ack is remembered as long as the extended delivery (the floor too): never shorter than its own
    assert settlements.prune(now_ms=1_001 + RETAIN_MS) == 0
    assert settlements.settled_by(0, 5, 100) == "ack"
    assert settlements.floors() == {0: 9}
    assert settlements.prune(now_ms=9_001 + RETAIN_MS) == 1
    assert settlements.settled_by(0, 5, 100) is None


def test_a_batch_end_note_settles_exactly_the_offsets_of_its_runs() -> None:
    settlements = Settlements()
    runs = ((10, 3), (20, 1), (30, 5))  # 10-12, 20, 30-34
    settlements.observe_runs(2, runs, Note("ack", 100, 1_000), marker_offset=40)
    settled = [offset for offset in range(0, 40) if settlements.settled_by(2, offset, 100) == "ack"]
    assert settled == [10, 11, 12, 20, 30, 31, 32, 33, 34]
    assert settlements.settled_by(2, 11, 101) is None  # another receive
    assert settlements.settled_by(1, 11, 100) is None  # another partition
    settlements.observe_runs(2, runs, Note("ack", 100, 1_000), marker_offset=40)  # the same note, read back
    assert len(settlements) == 1


def test_the_earliest_note_says_how_a_delivery_was_settled_across_single_and_batch_notes() -> None:
    settlements = Settlements()
    settlements.observe(0, 11, Note("nack", 100, 1_000), marker_offset=50)
    settlements.observe_runs(0, ((10, 5),), Note("ack", 100, 1_000), marker_offset=40)
    assert settlements.settled_by(0, 11, 100) == "ack"  # written before the nack (two replicas racing)
    settlements.observe(0, 13, Note("nack", 100, 1_000), marker_offset=30)
    assert settlements.settled_by(0, 13, 100) == "nack"


@given(st.sets(st.integers(0, 500), min_size=1, max_size=60), st.integers(0, 520))
def test_runs_cover_exactly_their_offsets(offsets: set[int], probe: int) -> None:
    settlements = Settlements()
    settlements.observe_runs(0, runs_of(offsets), Note("ack", 1, 2), marker_offset=0)
    assert (settlements.settled_by(0, probe, 1) == "ack") == (probe in offsets)


def test_a_replica_resumes_at_its_first_remembered_note_never_past_what_it_read() -> None:
    # partition 0: notes remembered from 9; partition 1: none; partition 2: its own note at 150, read only to 100
    assert resume_offsets({0: 20, 1: 7, 2: 100}, {0: 9, 2: 150}) == {0: 9, 1: 7, 2: 100}


# The settle-once rule (kmq.receipt_notes): the first note in marker order wins; a later one loses when the delivery
# is settled or its receipt spent. R = the receipt of deadline 1 000 of delivery (0, 5, 100).
def test_of_two_settles_with_one_receipt_the_first_in_marker_order_wins() -> None:
    for first, second in [("ack", "ack"), ("ack", "nack"), ("nack", "ack"), ("nack", "extend"), ("extend", "nack")]:
        settlements = Settlements()
        # given both written, the second read first (replicas learn them in any order)
        settlements.observe(0, 5, Note(second, 100, 9_000 if second == "extend" else 1_000, 1_000), marker_offset=8)  # type: ignore[arg-type]
        settlements.observe(0, 5, Note(first, 100, 9_000 if first == "extend" else 1_000, 1_000), marker_offset=7)  # type: ignore[arg-type]
        # then the first in marker order wins, the other loses, whoever asks
        assert (settlements.won(0, 5, 100, 7), settlements.won(0, 5, 100, 8)) == (True, False), (first, second)
        assert settlements.settled_by(0, 5, 100) == (None if first == "extend" else first)
        assert settlements.refusal(0, 5, 100, 1_000) is not None  # the receipt cannot settle again


def test_an_extend_spends_its_receipt_and_the_one_it_returns_settles() -> None:
    settlements = Settlements()
    settlements.observe(0, 5, Note("extend", 100, 9_000, 1_000), marker_offset=7)  # R spent, R' (9 000) handed out
    assert settlements.refusal(0, 5, 100, 1_000) == "already used (an extend returned the receipt to use now)"
    assert settlements.refusal(0, 5, 100, 9_000) is None
    settlements.observe(0, 5, Note("ack", 100, 1_000, 1_000), marker_offset=8)  # R again: loses
    settlements.observe(0, 5, Note("nack", 100, 9_000, 9_000), marker_offset=9)  # R': wins
    assert [settlements.won(0, 5, 100, m) for m in (7, 8, 9)] == [True, False, True]
    assert settlements.settled_by(0, 5, 100) == "nack"
    assert settlements.refusal(0, 5, 100, 9_000) == "already settled by nack"


def test_notes_of_older_facades_decode_with_what_they_tell() -> None:
    old_ack = bytes([0]) + (100).to_bytes(8, "big") + (1_000).to_bytes(8, "big")
    old_extend = bytes([2]) + (100).to_bytes(8, "big") + (9_000).to_bytes(8, "big")
    assert Note.decode(old_ack) == Note("ack", 100, 1_000, 1_000)  # an ack's receipt deadline is its keep_until
    assert Note.decode(old_extend) == Note("extend", 100, 9_000, None)  # unknown: spends no receipt


def test_a_note_is_kept_until_the_later_of_its_two_deadlines() -> None:
    # given an extend noted with a new deadline (2 000) earlier than that of the receipt it spent (5 000)
    settlements = Settlements()
    settlements.observe(0, 5, Note("extend", 100, 2_000, 5_000), marker_offset=7)
    # then it is remembered until the spent receipt's deadline: a settle with that receipt is refused until then
    assert settlements.prune(now_ms=2_001 + RETAIN_MS) == 0
    assert settlements.refusal(0, 5, 100, 5_000) is not None
    assert settlements.forget(now_ms=5_001 + RETAIN_MS) == [(0, 5_000, 7)]
    assert len(settlements) == 0
