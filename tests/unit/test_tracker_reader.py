"""The queue reader's offset walk: which wanted offsets were found, are gone, or were not reached."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError
from confluent_kafka import Message as KafkaMessage

from kmq_tracker.reader import MAX_GAP, ReadResult, _Cursor, _runs


@dataclass
class FakeMessage:
    """The parts of a confluent-kafka Message the cursor reads."""

    _offset: int
    _error: KafkaError | None = None

    def error(self) -> KafkaError | None:
        return self._error

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k%d" % self._offset

    def value(self) -> bytes:
        return b"v%d" % self._offset

    def headers(self) -> list[tuple[str, bytes]]:
        return [("h", b"x")]

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_CREATE_TIME, 1_000 + self._offset


def eof(offset: int) -> FakeMessage:
    return FakeMessage(offset, KafkaError(KafkaError._PARTITION_EOF))


def walk(run: list[int], messages: list[FakeMessage]) -> tuple[ReadResult, list[int]]:
    result = ReadResult()
    cursor = _Cursor(run, result)
    for message in messages:
        cursor.take(cast("KafkaMessage", message))
    return result, cursor.remaining()


def test_contiguous_offsets_are_found_in_one_pass() -> None:
    result, remaining = walk([3, 4, 5], [FakeMessage(o) for o in (3, 4, 5, 6)])
    assert [r.offset for r in result.found] == [3, 4, 5]
    assert result.found[0].key == b"k3"
    assert result.found[0].headers == [("h", b"x")]
    assert result.found[0].timestamp_ms == 1_003
    assert result.missing == remaining == []


def test_offsets_between_wanted_ones_are_read_through() -> None:
    result, remaining = walk([3, 6], [FakeMessage(o) for o in (3, 4, 5, 6)])
    assert [r.offset for r in result.found] == [3, 6]
    assert remaining == []


def test_offsets_passed_over_below_the_end_are_sorted_by_the_log_start_later() -> None:
    # wanted 3 and 4, but the first record read is 5: the log now starts there (the consumer reset to it), or 3 and 4
    # are a transaction marker and an aborted record (the reader tells which by the partition's log start)
    result, remaining = walk([3, 4, 7], [FakeMessage(o) for o in (5, 6, 7)])
    assert result.skipped == [3, 4]
    assert result.missing == []
    assert [r.offset for r in result.found] == [7]
    assert remaining == []


def test_a_reset_to_the_log_start_means_the_offsets_are_past_the_end() -> None:
    # wanted 50 and 51 of a recreated topic holding 0..9: the consumer reset to offset 0
    result, remaining = walk([50, 51], [FakeMessage(0)])
    assert result.missing == [50, 51]
    assert result.found == []
    assert remaining == []


def test_end_of_partition_before_the_wanted_offsets_means_they_are_gone() -> None:
    result, remaining = walk([3, 9, 12], [FakeMessage(3), eof(8)])
    assert [r.offset for r in result.found] == [3]
    assert result.missing == [9, 12]
    assert result.skipped == remaining == []


def test_offsets_below_the_end_of_partition_held_no_record_to_read() -> None:
    # 5 and 6 (a commit marker, say) lie below the end the read reached (7); 9 past it
    result, remaining = walk([3, 5, 6, 9], [FakeMessage(3), eof(7)])
    assert [r.offset for r in result.found] == [3]
    assert (result.skipped, result.missing, remaining) == ([5, 6], [9], [])


def test_not_reached_offsets_remain_unread() -> None:
    result, remaining = walk([3, 9], [FakeMessage(3), FakeMessage(4)])
    assert remaining == [9]
    assert result.missing == []


def test_an_error_stops_the_run_for_a_retry() -> None:
    error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    result, remaining = walk([3, 4], [FakeMessage(3), FakeMessage(-1, error), FakeMessage(4)])
    assert result.error is not None
    assert [r.offset for r in result.found] == [3]
    assert remaining == [4]


def test_runs_split_where_gaps_are_wide() -> None:
    assert _runs([1, 2, 3, 3 + MAX_GAP, 4 + 2 * MAX_GAP]) == [[1, 2, 3, 3 + MAX_GAP], [4 + 2 * MAX_GAP]]
    assert _runs([]) == []
