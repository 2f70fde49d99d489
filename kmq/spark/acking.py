"""Per-row acknowledgement from executors, with KmqClient's semantics: ok → END (`processed`), retry → a START
with the delay (`nack`), reject → the dead-letter topic, waited for, then END (`reject`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Producer

from kmq import headers as h
from kmq.config import KmqConfig
from kmq.delivery import DeliveryGroup
from kmq.errors import AckInputError, DeliveryError
from kmq.kafka import produce, producer_settings
from kmq.marker_writer import MarkerWriter
from kmq.markers import MarkerKey
from kmq.spark.ack_ends import OkOffsets
from kmq.spark.clients import discard, marker_producer
from kmq.spark.fetching import fetch_messages
from kmq.spark.values import headers as to_headers

STATUSES = ("ok", "retry", "reject")
ACK_COLUMNS = ("partition", "offset", "status")
_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Ack:
    """One row of the acknowledgement input; `value` and `headers` (optional columns) spare a re-read on reject."""

    partition: int
    offset: int
    status: str
    delay_ms: int | None = None
    reason: str | None = None
    redelivery_count: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: h.Headers | None = None
    has_message: bool = False


def parse(fields: dict[str, Any]) -> Ack:
    """An Ack from a row's fields; AckInputError names what is wrong with the row."""
    where = f"row (partition={fields.get('partition')}, offset={fields.get('offset')})"
    for column in ACK_COLUMNS:
        if fields.get(column) is None:
            raise AckInputError(f"{where}: column {column!r} is null or missing; every row needs {ACK_COLUMNS}")
    status = fields["status"]
    if status not in STATUSES:
        raise AckInputError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}; nothing was acked")
    delay = fields.get("delay_ms")
    if delay is not None and delay < 0:
        raise AckInputError(f"{where}: delay_ms must not be negative, got {delay}")
    return Ack(
        partition=int(fields["partition"]),
        offset=int(fields["offset"]),
        status=status,
        delay_ms=None if delay is None else int(delay),
        reason=fields.get("reason"),
        redelivery_count=int(fields.get("redelivery_count") or 0),
        key=fields.get("key"),
        value=fields.get("value"),
        headers=to_headers(fields.get("headers")),
        has_message="value" in fields,
    )


def parse_batches(batches: Iterable[pa.RecordBatch]) -> tuple[OkOffsets, list[Ack]]:
    """A task's Arrow batches as (its ok rows, an Ack for each other row), every row checked. The ok rows, nearly
    all of them, are picked out by Arrow compute and stay Arrow columns: an END needs nothing else."""
    ends = OkOffsets()
    others: list[Ack] = []
    for batch in batches:
        partitions, offsets, statuses = (batch.column(name) for name in ACK_COLUMNS)
        ok = pc.fill_null(pc.and_kleene(pc.equal(statuses, "ok"), _both_set(partitions, offsets)), False)
        if pc.all(ok).as_py():
            ends.add(partitions, offsets)
            continue
        ends.add(partitions.filter(ok), offsets.filter(ok))
        others.extend(parse(row) for row in batch.filter(pc.invert(ok)).to_pylist())
    return ends, others


def _both_set(partitions: pa.Array, offsets: pa.Array) -> pa.Array:
    return pc.and_(pc.is_valid(partitions), pc.is_valid(offsets))


def apply(config: KmqConfig, acks: Sequence[Ack], ends: OkOffsets | None = None) -> None:
    """Write every acknowledgement (`ends`: the ok rows) and wait for all of them; DeliveryError fails the task
    (Spark retries it, and writing the same markers again is harmless). ENDs go first, then nacks and rejects, as
    the rows' order would have them if a row were acked twice."""
    markers = MarkerWriter(config, marker_producer(config, "acks"))
    try:
        _write(config, markers, acks, ends)
    except Exception:
        discard(config, "acks")
        raise


def _write(config: KmqConfig, markers: MarkerWriter, acks: Sequence[Ack], ends: OkOffsets | None) -> None:
    _dead_letter(config, [ack for ack in acks if ack.status == "reject"])
    if ends is not None:
        ends.write(markers)
    for ack in acks:
        if ack.status == "retry":
            delay = config.nack_delay_ms(ack.redelivery_count) if ack.delay_ms is None else ack.delay_ms
            markers.start(MarkerKey(ack.partition, ack.offset), delay)
        else:  # ok, and reject once its dead letter is written
            markers.end_at(ack.partition, ack.offset)
    remaining = markers.flush(_TIMEOUT_S)
    if remaining or markers.failed_markers:
        failed = remaining + markers.failed_markers
        raise DeliveryError(config.markers_topic, None, f"{failed} acknowledgement markers not written")


def _dead_letter(config: KmqConfig, rejects: Iterable[Ack]) -> None:
    """Write the rejected messages to D (original key, value, headers plus kmq's) and wait until all are stored."""
    rejects = list(rejects)
    if not rejects:
        return
    missing = [MarkerKey(a.partition, a.offset) for a in rejects if not a.has_message]
    fetched = fetch_messages(config, missing) if missing else {}
    producer = Producer(producer_settings(config))
    group = DeliveryGroup()
    for index, ack in enumerate(rejects):
        key, value, headers = _content(ack, fetched)
        reason = f"rejected: {ack.reason or 'no reason given'}"
        dead = h.dead_letter(headers, config.queue_topic, ack.partition, ack.offset, reason)
        produce(producer, config.dead_letter_topic, value, key, dead, on_delivery=group.callback(index))
    group.wait(producer, _TIMEOUT_S)


def _content(ack: Ack, fetched: dict[MarkerKey, tuple[bytes | None, bytes | None, h.Headers]]) -> tuple[
    bytes | None, bytes | None, h.Headers]:  # fmt: skip
    if ack.has_message:
        return ack.key, ack.value, ack.headers or []
    return fetched[MarkerKey(ack.partition, ack.offset)]
