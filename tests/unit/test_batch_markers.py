"""The batch marker codec against PROTOCOL.md's bytes ("Batch markers (format `batch`)")."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmq.batch_markers import (
    MAX_OFFSETS,
    MAX_RUNS,
    BatchEnd,
    BatchStart,
    contiguous_runs,
    decode_batch_marker,
    offsets_in,
    runs_of,
    split_runs,
)
from kmq.errors import MarkerDecodeError

OFFSET_SETS = st.sets(st.integers(0, 10_000), min_size=1, max_size=300)


def test_a_contiguous_batch_of_500_is_one_run_in_21_bytes() -> None:
    start = BatchStart(30_000, runs_of(range(1000, 1500)))
    assert start.runs == ((1000, 500),)
    assert start.encode() == bytes.fromhex("0200000000000075300000000100000000000001f4")
    assert len(start.encode()) == 21


def test_batch_end_bytes_gap_is_counted_from_the_end_of_the_previous_run() -> None:
    # {5, 6, 7, 10, 20, 21}: runs (5,3) (10,1) (20,2); gaps 0, 10-8=2, 20-11=9.
    end = BatchEnd(runs_of([21, 5, 6, 7, 10, 20, 6]))
    assert end.runs == ((5, 3), (10, 1), (20, 2))
    assert end.encode() == bytes.fromhex("0300000003000000000000000300000002000000010000000900000002")


def test_decodes_fixed_vectors() -> None:
    value = bytes.fromhex("0200000000000000640000000200000000000000020000000100000001")
    assert decode_batch_marker(40, value) == BatchStart(100, ((40, 2), (43, 1)))
    assert decode_batch_marker(7, bytes.fromhex("03000000010000000000000001")) == BatchEnd(((7, 1),))


def _start(runs: list[tuple[int, int]], n: int | None = None) -> bytes:
    flat = [x for run in runs for x in run]
    return struct.pack(f">bqi{len(flat)}i", 2, 1000, len(runs) if n is None else n, *flat)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "null"),
        (b"", "0 bytes"),
        (b"\x02\x00", "shorter"),
        (_start([]), "0 runs"),
        (_start([(0, 1)], n=2), "must be 29 bytes"),
        (_start([(0, 1)]) + b"\x00", "must be 21 bytes"),
        (_start([(1, 1)]), "gap 0"),
        (_start([(0, 1), (0, 1)]), "gap 0 (must be >= 1)"),
        (_start([(0, 0)]), "length 0"),
        (_start([(0, -3)]), "length -3"),
        (_start([(0, 1)], n=-1), "-1 runs"),
        (_start([(0, 1)], n=MAX_RUNS + 1), f"{MAX_RUNS + 1} runs"),
        (_start([(0, 600_000), (1, 600_000)]), f"more than {MAX_OFFSETS}"),
        (b"\x01" + b"\x00" * 12, "type byte 0x01"),
    ],
)
def test_every_broken_rule_is_not_a_marker_with_its_reason(value: bytes | None, reason: str) -> None:
    with pytest.raises(MarkerDecodeError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        decode_batch_marker(0, value)


def test_offsets_past_int64_are_not_a_marker() -> None:
    with pytest.raises(MarkerDecodeError, match="2\\^63"):
        decode_batch_marker(2**63 - 2, _start([(0, 5)]))


def test_the_limits_themselves_are_accepted() -> None:
    runs = [(0, 1)] + [(1, 1)] * (MAX_RUNS - 1)
    assert len(decode_batch_marker(0, _start(runs)).runs) == MAX_RUNS
    assert decode_batch_marker(0, _start([(0, MAX_OFFSETS)])).runs == ((0, MAX_OFFSETS),)


@given(OFFSET_SETS, st.integers(0, 2**40), st.integers(-(2**63), 2**63 - 1))
def test_start_round_trips(offsets: set[int], base: int, after_ms: int) -> None:
    runs = runs_of(o + base for o in offsets)
    start = BatchStart(after_ms, runs)
    assert decode_batch_marker(start.base_offset, start.encode()) == start
    assert set(offsets_in(runs)) == {o + base for o in offsets}


@given(OFFSET_SETS)
def test_end_round_trips(offsets: set[int]) -> None:
    end = BatchEnd(runs_of(offsets))
    assert decode_batch_marker(min(offsets), end.encode()) == end


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=200))
def test_contiguous_runs_agrees_with_runs_of(offsets: list[int]) -> None:
    assert contiguous_runs(offsets) == runs_of(offsets)
    assert contiguous_runs(list(range(50, 90))) == ((50, 40),)


@given(OFFSET_SETS, st.integers(1, 50), st.integers(1, 5))
def test_split_runs_keeps_the_set_within_limits(offsets: set[int], max_offsets: int, max_runs: int) -> None:
    pieces = split_runs(runs_of(offsets), max_offsets, max_runs)
    assert [o for piece in pieces for o in offsets_in(piece)] == sorted(offsets)
    assert all(len(piece) <= max_runs and sum(n for _, n in piece) <= max_offsets for piece in pieces)


@given(st.integers(-(2**63), 2**63 - 1), st.binary(max_size=64))
def test_random_bytes_raise_only_the_codec_error(base: int, tail: bytes) -> None:
    for value in (tail, b"\x02" + tail, b"\x03" + tail):
        with contextlib.suppress(MarkerDecodeError):
            decode_batch_marker(base, value)


@given(st.integers(-(2**63), 2**63 - 1), st.integers(1, 8).flatmap(lambda n: st.binary(min_size=8 * n, max_size=8 * n)))
def test_random_runs_of_the_right_length_raise_only_the_codec_error(base: int, runs: bytes) -> None:
    n = struct.pack(">i", len(runs) // 8)
    for value in (b"\x03" + n + runs, b"\x02" + b"\x00" * 8 + n + runs):
        try:
            marker = decode_batch_marker(base, value)
        except MarkerDecodeError:
            continue
        assert marker.base_offset == base
