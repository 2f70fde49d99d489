"""The marker codec against PROTOCOL.md's bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmq.errors import MarkerDecodeError
from kmq.markers import EndMarker, MarkerKey, StartMarker, decode_marker

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


def test_key_bytes_are_partition_then_offset_big_endian() -> None:
    assert MarkerKey(1, 1000).encode() == bytes.fromhex("0000000100000000000003e8")


def test_start_bytes_are_type_one_then_duration() -> None:
    assert StartMarker(30_000).encode() == bytes.fromhex("010000000000007530")


def test_end_bytes_are_a_single_zero() -> None:
    assert EndMarker().encode() == b"\x00"


def test_decodes_fixed_vectors() -> None:
    assert MarkerKey.decode(bytes.fromhex("0000000700000000000f4240")) == MarkerKey(7, 1_000_000)
    assert decode_marker(bytes.fromhex("010000000000000064")) == StartMarker(100)
    assert decode_marker(b"\x00") == EndMarker()


@pytest.mark.parametrize(
    "value",
    [None, b"", b"\x02", b"\x00\x00", b"\x01" + b"\x00" * 7, b"\x01" + b"\x00" * 9, b"\x02" + b"\x00" * 8],
)
def test_anything_else_is_not_a_marker(value: bytes | None) -> None:
    with pytest.raises(MarkerDecodeError):
        decode_marker(value)


@pytest.mark.parametrize("key", [None, b"", b"\x00" * 11, b"\x00" * 13])
def test_keys_of_the_wrong_length_are_refused(key: bytes | None) -> None:
    with pytest.raises(MarkerDecodeError, match="12 bytes"):
        MarkerKey.decode(key)


@given(INT32, INT64)
def test_key_round_trips(partition: int, offset: int) -> None:
    key = MarkerKey(partition, offset)
    assert MarkerKey.decode(key.encode()) == key


@given(INT64)
def test_start_round_trips(duration_ms: int) -> None:
    assert decode_marker(StartMarker(duration_ms).encode()) == StartMarker(duration_ms)


@given(st.binary(max_size=20))
def test_decoding_arbitrary_bytes_gives_a_marker_or_a_decode_error(data: bytes) -> None:
    try:
        marker = decode_marker(data)
    except MarkerDecodeError:
        return
    assert marker.encode() == data
