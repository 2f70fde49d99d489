"""Header encodings of PROTOCOL.md: the redelivery count (kmq's two forms), copies and dead letters."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from kmq import headers as h


def test_count_is_one_byte_up_to_127_and_int32_above() -> None:
    assert h.encode_count(0) == b"\x00"
    assert h.encode_count(127) == b"\x7f"
    assert h.encode_count(128) == b"\x00\x00\x00\x80"


@given(st.integers(0, 2**31 - 1))
def test_count_round_trips(count: int) -> None:
    assert h.decode_count(h.encode_count(count)) == count


def test_unreadable_count_is_zero() -> None:
    assert h.decode_count(None) == 0
    assert h.decode_count(b"\x00\x01") == 0
    # Any producer can write four bytes that read as a negative int32: never a negative count.
    assert h.decode_count(struct.pack(">i", -(2**31))) == 0


def test_first_redelivery_keeps_headers_and_records_the_original_offset() -> None:
    copy = h.redelivered([("trace", b"abc")], offset=42)
    assert copy[0] == ("trace", b"abc")
    assert h.redelivery_count(copy) == 1
    assert h.original_offset(copy, offset=999) == 42


def test_second_redelivery_counts_up_and_keeps_the_first_offset() -> None:
    again = h.redelivered(h.redelivered([("trace", b"abc")], offset=42), offset=77)
    assert h.redelivery_count(again) == 2
    assert h.original_offset(again, offset=100) == 42
    assert [k for k, _ in again].count(h.REDELIVERY_COUNT) == 1


def test_dead_letter_headers_name_origin_and_reason() -> None:
    dead = h.dead_letter(h.redelivered([("trace", b"abc")], offset=5), "jobs", 3, 9, "max-redeliveries")
    assert h.get(dead, "trace") == b"abc"
    assert h.get(dead, h.DLQ_REASON) == b"max-redeliveries"
    assert h.get(dead, h.ORIGINAL_TOPIC) == b"jobs"
    assert h.get(dead, h.ORIGINAL_PARTITION) == struct.pack(">i", 3)
    assert h.decode_int64(h.get(dead, h.ORIGINAL_OFFSET)) == 5
    assert h.redelivery_count(dead) == 1


def test_from_kafka_accepts_none_lists_and_str_values() -> None:
    assert h.from_kafka(None) == []
    assert h.from_kafka([("a", b"1"), ("b", None)]) == [("a", b"1"), ("b", None)]
    assert h.from_kafka([("a", "x")]) == [("a", b"x")]


def test_headers_to_send_from_a_mapping_keep_names_and_values() -> None:
    assert h.to_send({"trace": b"t1", "empty": None}) == [("trace", b"t1"), ("empty", None)]


def test_headers_to_send_from_any_sequence_of_pairs() -> None:
    assert h.to_send((("trace", b"t1"), ("trace", b"t2"))) == [("trace", b"t1"), ("trace", b"t2")]
    pairs = [("a", b"1")]
    assert h.to_send(pairs) is pairs
    assert h.to_send(None) is None
    assert h.to_send({}) == []
