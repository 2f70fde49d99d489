"""`Settlements`: which deliveries are settled, from the notes on the markers topic (given/when/then)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.settlements import RETAIN_MS, Note, Settlements


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


def test_the_floor_is_the_first_marker_of_a_remembered_delivery_per_partition() -> None:
    settlements = Settlements()
    assert settlements.floor(0) is None
    settlements.observe(0, 5, Note("ack", 100, 1_000), marker_offset=9)
    settlements.observe(0, 6, Note("extend", 100, 9_000), marker_offset=12)
    settlements.observe(1, 5, Note("ack", 100, 1_000), marker_offset=3)
    assert (settlements.floor(0), settlements.floor(1)) == (9, 3)
    settlements.prune(now_ms=1_001 + RETAIN_MS)
    assert (settlements.floor(0), settlements.floor(1)) == (12, None)
