"""`plan`: which marker records a settle writes, and the notes they carry; the settle view's decoding of them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kmq.batch_markers import BatchEnd, decode_batch_marker, offsets_in
from kmq.config import KmqConfig
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq_api.receipts import Receipt
from kmq_api.settle_markers import Write, plan
from kmq_api.settle_view import noted_runs
from kmq_api.settlements import HEADER, Note


def config(marker_format: str) -> KmqConfig:
    return KmqConfig(bootstrap_servers="k:9092", queue_topic="jobs", marker_format=marker_format)


def write(index: int, partition: int, offset: int, issued_at_ms: int = 100, deadline_ms: int = 5_000) -> Write:
    return Write(index, Receipt("jobs", partition, offset, issued_at_ms, deadline_ms), expired=False)


def note_of(headers: list[tuple[str, bytes | None]] | None) -> Note | None:
    [(name, value)] = headers or []
    assert name == HEADER
    return Note.decode(value)


def test_with_kmq_markers_each_ack_is_an_end_of_its_own() -> None:
    writes = [write(0, 0, 5), write(1, 0, 6), write(2, 1, 5)]
    markers = plan(config("kmq"), writes, "ack", now_ms=0, delay_ms=None, timeout_ms=0)
    assert [(m.record.value, m.record.key, m.record.partition) for m in markers] == [
        (EndMarker().encode(), MarkerKey(0, 5).encode(), 0),
        (EndMarker().encode(), MarkerKey(0, 6).encode(), 0),
        (EndMarker().encode(), MarkerKey(1, 5).encode(), 1),
    ]
    assert [m.writes for m in markers] == [(w,) for w in writes]
    assert {note_of(m.record.headers) for m in markers} == {Note("ack", 100, 5_000, 5_000)}


def test_with_batch_markers_acks_of_one_partition_and_issue_time_share_a_batch_end() -> None:
    # given acks of two receives (issue times 100 and 200) over two partitions, in no order
    writes = [write(0, 0, 7), write(1, 1, 3), write(2, 0, 5, deadline_ms=6_000), write(3, 0, 9, issued_at_ms=200)]
    # when planned
    markers = plan(config("batch"), writes, "ack", now_ms=0, delay_ms=None, timeout_ms=0)
    # then one BATCH END per (partition, issue time, receipt deadline), keyed by its base offset, noted until then
    found = {}
    for marker in markers:
        key = MarkerKey.decode(marker.record.key)
        assert marker.record.partition == key.partition
        batch = decode_batch_marker(key.offset, marker.record.value)
        assert isinstance(batch, BatchEnd)
        assert [w.receipt.offset for w in marker.writes] == list(offsets_in(batch.runs))
        found[(key.partition, marker.note.issued_at_ms, marker.note.receipt_deadline_ms)] = (
            list(offsets_in(batch.runs)),
            marker.note,
        )
        assert note_of(marker.record.headers) == marker.note
    assert found == {
        (0, 100, 5_000): ([7], Note("ack", 100, 5_000, 5_000)),
        (0, 100, 6_000): ([5], Note("ack", 100, 6_000, 6_000)),  # an extended receipt: a receipt of its own
        (1, 100, 5_000): ([3], Note("ack", 100, 5_000, 5_000)),
        (0, 200, 5_000): ([9], Note("ack", 200, 5_000, 5_000)),
    }


def test_nack_and_extend_stay_single_starts_with_batch_markers() -> None:
    writes = [write(0, 0, 5), write(1, 0, 6)]
    nacks = plan(config("batch"), writes, "nack", now_ms=1_000, delay_ms=250, timeout_ms=0)
    assert [m.record.value for m in nacks] == [StartMarker(250).encode()] * 2
    assert {m.note for m in nacks} == {Note("nack", 100, 5_000, 5_000)}
    extends = plan(config("batch"), writes, "extend", now_ms=1_000, delay_ms=None, timeout_ms=60_000)
    assert [m.record.value for m in extends] == [StartMarker(60_000).encode()] * 2
    assert {m.note for m in extends} == {Note("extend", 100, 61_000, 5_000)}  # spends the receipt of deadline 5 000


def test_an_extend_that_shortens_the_deadline_is_noted_until_the_spent_receipts_deadline() -> None:
    # given a receipt due at 5 000, extended at 1 000 by 1 000 ms (a new deadline of 2 000)
    extends = plan(config("batch"), [write(0, 0, 5)], "extend", now_ms=1_000, delay_ms=None, timeout_ms=1_000)
    # then the note is kept until 5 000: until then the spent receipt could still be used, and must be refused
    assert {m.note for m in extends} == {Note("extend", 100, 5_000, 5_000)}


@given(st.sets(st.integers(0, 10_000), min_size=1, max_size=200))
def test_the_settle_view_reads_back_every_offset_a_batch_end_acks(offsets: set[int]) -> None:
    writes = [write(index, 0, offset) for index, offset in enumerate(offsets)]
    [marker] = plan(config("batch"), writes, "ack", now_ms=0, delay_ms=None, timeout_ms=0)
    key = MarkerKey.decode(marker.record.key)
    assert noted_runs(key.offset, marker.record.value) == marker.runs
    assert list(offsets_in(marker.runs)) == sorted(offsets)


def test_the_settle_view_notes_a_kmq_marker_by_its_key_and_a_broken_batch_value_not_at_all() -> None:
    assert noted_runs(42, EndMarker().encode()) == ((42, 1),)
    assert noted_runs(42, StartMarker(10).encode()) == ((42, 1),)
    assert noted_runs(42, bytes([3, 0, 0, 0, 1])) == ()  # a BATCH END announcing a run it does not hold
