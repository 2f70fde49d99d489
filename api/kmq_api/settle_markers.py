"""The marker records a settle writes, each with the `kmq-receipt` note it carries (PROTOCOL.md "Marker records",
"Batch markers").

nack and extend write one kmq START per receipt. ack writes one kmq END per receipt on a queue with `kmq` markers;
with `batch` markers it writes one BATCH END per markers partition and issue time, covering every receipt of the
request that shares them (a receive hands out one issue time, so acking what one receive returned costs one record
per partition instead of one per message). Its note then applies to every offset of the record's set: the settle
view decodes the runs back into deliveries (kmq_api.settle_view).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from kmq.batch_markers import BatchEnd, Run, runs_of, split_runs
from kmq.config import KmqConfig
from kmq.markers import EndMarker, StartMarker, encode_key
from kmq_api.delivery import Record
from kmq_api.receipts import Receipt
from kmq_api.settlements import HEADER, Action, Note

_END = EndMarker().encode()


@dataclass(frozen=True, slots=True)
class Write:
    """A receipt the request settles: its place in the request, and whether its deadline had passed."""

    index: int
    receipt: Receipt
    expired: bool


@dataclass(frozen=True, slots=True)
class Marker:
    """One marker record to write, the note it carries and the receipts it settles (one, or a BATCH END's set)."""

    record: Record
    note: Note
    writes: tuple[Write, ...]
    runs: tuple[Run, ...]  # the offsets of the writes


def plan(
    config: KmqConfig, writes: list[Write], action: Action, now_ms: int, delay_ms: int | None, timeout_ms: int
) -> list[Marker]:
    """The records that settle `writes`; every write is in exactly one of them."""
    if action == "ack" and config.marker_format == "batch":
        return _batch_ends(config.markers_topic, writes)
    return [_single(config, write, action, now_ms, delay_ms, timeout_ms) for write in writes]


def _single(
    config: KmqConfig, write: Write, action: Action, now_ms: int, delay_ms: int | None, timeout_ms: int
) -> Marker:
    receipt = write.receipt
    if action == "ack":
        value = _END
    elif action == "extend":
        value = StartMarker(timeout_ms).encode()
    else:
        delay = config.nack_delay_ms(receipt.redelivery_count) if delay_ms is None else delay_ms
        value = StartMarker(delay).encode()
    # The note is kept until the latest deadline of a receipt of the delivery: an extend's new one, or the one it
    # spent when the extend shortened the deadline (that receipt must still be known as spent until it expires).
    keep_until_ms = max(now_ms + timeout_ms, receipt.deadline_ms) if action == "extend" else receipt.deadline_ms
    note = Note(action, receipt.issued_at_ms, keep_until_ms, receipt.deadline_ms)
    record = _record(config.markers_topic, receipt.partition, receipt.offset, value, note)
    return Marker(record, note, (write,), ((receipt.offset, 1),))


def _batch_ends(topic: str, writes: list[Write]) -> list[Marker]:
    """One BATCH END per (partition, issue time, receipt deadline): the note names the deliveries by the first two,
    with the key's offsets, and their receipts by the third (receipts of one receive share it unless extended)."""
    groups: dict[tuple[int, int, int], list[Write]] = defaultdict(list)
    for write in writes:
        groups[(write.receipt.partition, write.receipt.issued_at_ms, write.receipt.deadline_ms)].append(write)
    markers: list[Marker] = []
    for (partition, issued_at_ms, deadline_ms), group in groups.items():
        note = Note("ack", issued_at_ms, deadline_ms, deadline_ms)
        by_offset = {write.receipt.offset: write for write in group}
        for runs in split_runs(runs_of(by_offset)):
            covered = tuple(by_offset[offset] for start, length in runs for offset in range(start, start + length))
            record = _record(topic, partition, runs[0][0], BatchEnd(runs).encode(), note)
            markers.append(Marker(record, note, covered, runs))
    return markers


def _record(topic: str, partition: int, offset: int, value: bytes, note: Note) -> Record:
    # To the markers partition aligned with the message's (PROTOCOL.md): never left to the partitioner.
    return Record(topic, value, encode_key(partition, offset), [(HEADER, note.encode())], partition=partition)
