"""The queue's columns, and Kafka records as Arrow record batches of them (what `read()` yields to Spark)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from confluent_kafka import Message as KafkaMessage

from kmq import headers as h

QUEUE_SCHEMA = (
    "partition int, offset long, key binary, value binary, "
    "headers array<struct<key string, value binary>>, timestamp timestamp, redelivery_count int"
)
_MS, _US = pa.timestamp("ms", tz="UTC"), pa.timestamp("us", tz="UTC")
_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
ARROW_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", pa.list_(_HEADER)),
        pa.field("timestamp", _US),
        pa.field("redelivery_count", pa.int32()),
    ]
)


def to_batch(records: Sequence[KafkaMessage]) -> pa.RecordBatch:
    """One Arrow batch of the records, columns as QUEUE_SCHEMA. One C-level method call per record and column:
    this runs for every row the source reads, in Python."""
    headers, counts = _headers([record.headers() for record in records])
    arrays = [
        pa.array([record.partition() for record in records], pa.int32()),
        pa.array([record.offset() for record in records], pa.int64()),
        pa.array([record.key() for record in records], pa.binary()),
        pa.array([record.value() for record in records], pa.binary()),
        headers,
        pa.array([record.timestamp()[1] for record in records], _MS).cast(_US),
        counts,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _headers(raw: list[object]) -> tuple[pa.Array, pa.Array]:
    """The headers and redelivery_count columns; first deliveries (no headers at all) cost no Python per row."""
    if not any(raw):
        offsets = pa.array([0] * (len(raw) + 1), pa.int32())
        return pa.ListArray.from_arrays(offsets, pa.array([], _HEADER)), pa.array([0] * len(raw), pa.int32())
    parsed = [h.from_kafka(headers) if headers else [] for headers in raw]
    column = [[{"key": k, "value": v} for k, v in pairs] for pairs in parsed]
    counts = [h.redelivery_count(pairs) if pairs else 0 for pairs in parsed]
    return pa.array(column, pa.list_(_HEADER)), pa.array(counts, pa.int32())
