"""`format("kmq-ack")`: acknowledge rows from executors — what `foreach_batch` uses for a handler's not-ok rows (a
batch write; the ok rows of a micro-batch are one BATCH END written by the driver)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from kmq.errors import AckInputError
from kmq.spark.acking import ACK_COLUMNS, apply, parse_batches
from kmq.spark.options import SourceOptions


class KmqAckDataSource(DataSource):
    """Input columns partition, offset, status (ok|retry|reject), optional delay_ms, reason, redelivery_count, and
    key/value/headers (else a rejected message is read back from the queue)."""

    @classmethod
    def name(cls) -> str:
        return "kmq-ack"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return AckWriter(SourceOptions.parse(self.options), schema)


class Acked(WriterCommitMessage):
    def __init__(self, count: int) -> None:
        self.count = count


def _write(options: SourceOptions, batches: Iterator[pa.RecordBatch]) -> Acked:
    """The task's rows are all checked before the first marker is written: a bad row acks nothing of the task.
    Arrow batches in: the ok rows never become Python objects (one BATCH END per partition with `batch` markers)."""
    ends, others = parse_batches(batches)
    apply(options.config, others, ends)
    return Acked(ends.rows + len(others))


def check_schema(schema: StructType) -> None:
    missing = [column for column in ACK_COLUMNS if column not in schema.fieldNames()]
    if missing:
        raise AckInputError(f"kmq-ack needs columns {', '.join(ACK_COLUMNS)}; missing: {', '.join(missing)}")


class AckWriter(DataSourceArrowWriter):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        check_schema(schema)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self.options, iterator)
