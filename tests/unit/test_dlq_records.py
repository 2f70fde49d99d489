"""Dead letters read back from their headers, the filters that select them, and the redrive marker's codec."""

from __future__ import annotations

from kmq import headers as h
from kmq.dlq.records import FIRST_FAILURE, REDRIVEN_FROM, DeadLetter, DeadLetterFilter, decode_marker, encode_marker


def dead_letter(reason: str = "rejected: bad", partition: int = 0, offset: int = 5, **extra: bytes) -> DeadLetter:
    raw = h.dead_letter([("trace", b"t1"), *extra.items()], "jobs", 3, 42, reason)
    return DeadLetter.parse(partition, offset, b"k", b"v", raw, 1_700_000_000_000)


def test_a_dead_letter_reads_its_origin_reason_and_count_from_the_headers() -> None:
    dead = dead_letter()
    assert (dead.reason, dead.origin_topic, dead.origin_partition, dead.origin_offset) == (
        "rejected: bad",
        "jobs",
        3,
        42,
    )
    assert dead.delivery_count == 0
    assert dead.headers == [("trace", b"t1")]
    assert dead.first_failure_ms == dead.dead_lettered_ms == 1_700_000_000_000


def test_a_redriven_copy_carries_a_fresh_count_its_origin_and_the_first_failure() -> None:
    copy = dead_letter().copy_headers("jobs__undelivered")
    assert h.redelivery_count(copy) == 0
    assert h.get(copy, REDRIVEN_FROM) == b"jobs__undelivered/0/5"
    # when that copy fails again, its new dead letter keeps the first failure's time
    again = DeadLetter.parse(1, 9, b"k", b"v", h.dead_letter(copy, "jobs", 3, 77, "rejected: bad"), 1_800_000_000_000)
    assert again.first_failure_ms == 1_700_000_000_000
    assert again.headers == [("trace", b"t1")]


def test_filters_match_every_given_field() -> None:
    dead = dead_letter(reason="max-redeliveries", partition=2, offset=10)
    assert DeadLetterFilter().matches(dead) and DeadLetterFilter().selects_all
    assert DeadLetterFilter(reason="max-").matches(dead)
    assert not DeadLetterFilter(reason="rejected").matches(dead)
    assert DeadLetterFilter(partition=2, from_offset=10, to_offset=10).matches(dead)
    assert not DeadLetterFilter(partition=2, from_offset=11).matches(dead)
    assert not DeadLetterFilter(origin_partition=4).matches(dead)
    assert not DeadLetterFilter(origin_partition=3).selects_all


def test_the_redrive_marker_round_trips_and_garbage_lists_nothing() -> None:
    assert decode_marker(encode_marker([(0, 5), (3, 9)])) == [(0, 5), (3, 9)]
    assert decode_marker(b"not json") == []
    assert decode_marker(None) == []
    assert decode_marker(b'{"redriven": [["x", 1]]}') == []


def test_a_header_that_is_not_a_time_falls_back_to_the_dead_letters_timestamp() -> None:
    assert dead_letter(**{FIRST_FAILURE: b"soon"}).first_failure_ms == 1_700_000_000_000
