"""The demo's verification arithmetic (`Tally`, `Verdict`) and its message numbering, without a broker."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmq import headers as h
from kmq.demo.numbers import decode_number, encode_number, is_poison
from kmq.demo.options import DemoOptions
from kmq.demo.tally import Tally
from kmq.errors import ConfigError

COPY = [(h.REDELIVERY_COUNT, h.encode_count(1)), (h.ORIGINAL_OFFSET, h.encode_int64(7))]


def sent(tally: Tally, *numbers: int) -> Tally:
    for n in numbers:
        tally.add_queued(encode_number(n), [])
    return tally


def test_a_run_where_everything_was_processed_or_dead_lettered_loses_nothing() -> None:
    # Given three messages sent, one redelivered copy, two processed (one twice) and one dead-lettered
    tally = sent(Tally(), 1, 2, 3)
    tally.add_queued(encode_number(2), COPY)
    for n in (1, 2, 2):
        tally.add_processed(encode_number(n))
    tally.add_dead(encode_number(3), [(h.DLQ_REASON, b"rejected: poison message")])
    # When the verdict is computed
    verdict = tally.verdict(3)
    # Then nothing is lost, the duplicate and the copy are counted, and the reason is kept
    assert verdict.ok
    assert (verdict.sent, verdict.processed, verdict.duplicates) == (3, 2, 1)
    assert (verdict.redelivered, verdict.dead_lettered, verdict.lost) == (1, 1, 0)
    assert verdict.dead_reasons == (("rejected: poison message", 1),)


def test_a_message_neither_processed_nor_dead_lettered_is_lost() -> None:
    tally = sent(Tally(), 1, 2, 3)
    tally.add_processed(encode_number(1))
    verdict = tally.verdict(3)
    assert not verdict.ok
    assert verdict.lost == 2
    assert verdict.lost_sample == (2, 3)


def test_a_message_that_never_reached_the_queue_is_lost_too() -> None:
    tally = sent(Tally(), 1)
    tally.add_processed(encode_number(1))
    verdict = tally.verdict(2)
    assert (verdict.sent, verdict.lost, verdict.lost_sample) == (1, 1, (2,))
    assert not verdict.ok


def test_a_redelivered_copy_is_not_counted_as_a_sent_message() -> None:
    tally = Tally()
    tally.add_queued(encode_number(5), COPY)
    assert tally.originals == set()
    assert tally.redelivered == 1


def test_in_flight_is_what_was_sent_and_not_yet_accounted_for() -> None:
    tally = sent(Tally(), 1, 2, 3, 4)
    tally.add_processed(encode_number(1))
    tally.add_dead(encode_number(2), [])
    assert (tally.accounted, tally.in_flight) == (2, 2)
    assert not tally.all_accounted(4)
    tally.add_processed(encode_number(3))
    tally.add_processed(encode_number(4))
    assert tally.all_accounted(4)


def test_records_that_are_not_demo_numbers_are_counted_apart() -> None:
    tally = Tally()
    tally.add_queued(b"hello from curl", [])
    tally.add_processed(None)
    assert tally.foreign == 2
    assert tally.originals == set()


@given(st.integers(min_value=0, max_value=10**17))
def test_numbers_round_trip(number: int) -> None:
    assert decode_number(encode_number(number)) == number


@pytest.mark.parametrize("value", [None, b"", b"-1", b"1.5", b"12a", b"1" * 19])
def test_anything_else_is_not_a_number(value: bytes | None) -> None:
    assert decode_number(value) is None


def test_poison_every_zero_sends_no_poison() -> None:
    assert [n for n in range(1, 2000) if is_poison(n, 997)] == [997, 1994]
    assert not any(is_poison(n, 0) for n in range(1, 100))


@pytest.mark.parametrize(
    ("field", "value"), [("messages", 0), ("workers", 0), ("drop_rate", 1.0), ("msg_timeout_ms", 0)]
)
def test_options_refuse_what_could_never_finish(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field):
        DemoOptions(**{field: value})  # type: ignore[arg-type]  # one bad field at a time
