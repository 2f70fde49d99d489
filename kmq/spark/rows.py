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
_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
ARROW_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", pa.list_(_HEADER)),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("redelivery_count", pa.int32()),
    ]
)


def to_batch(records: Sequence[KafkaMessage]) -> pa.RecordBatch:
    """One Arrow batch of the records, columns as QUEUE_SCHEMA."""
    headers = [h.from_kafka(record.headers()) for record in records]
    columns = [
        [record.partition() for record in records],
        [record.offset() for record in records],
        [record.key() for record in records],
        [record.value() for record in records],
        [[{"key": k, "value": v} for k, v in pairs] for pairs in headers],
        [record.timestamp()[1] * 1000 for record in records],
        [h.redelivery_count(pairs) if pairs else 0 for pairs in headers],
    ]
    arrays = [pa.array(column, type=field.type) for column, field in zip(columns, ARROW_SCHEMA, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
