"""`format("kmq-ack")`: acknowledge rows from executors (batch writes and streaming queries alike)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from kmq.errors import AckInputError
from kmq.spark.acking import ACK_COLUMNS, apply, parse
from kmq.spark.options import SourceOptions


class KmqAckDataSource(DataSource):
    """Input columns partition, offset, status (ok|retry|reject), optional delay_ms, reason, redelivery_count, and
    key/value/headers (else a rejected message is read back from the queue)."""

    @classmethod
    def name(cls) -> str:
        return "kmq-ack"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return AckWriter(SourceOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return AckStreamWriter(SourceOptions.parse(self.options), schema)


class Acked(WriterCommitMessage):
    def __init__(self, count: int) -> None:
        self.count = count


def _write(options: SourceOptions, iterator: Iterator[Any]) -> Acked:
    """The task's rows are all checked before the first marker is written: a bad row acks nothing of the task."""
    acks = [parse(row.asDict()) for row in iterator]
    apply(options.config, acks)
    return Acked(len(acks))


def check_schema(schema: StructType) -> None:
    missing = [column for column in ACK_COLUMNS if column not in schema.fieldNames()]
    if missing:
        raise AckInputError(f"kmq-ack needs columns {', '.join(ACK_COLUMNS)}; missing: {', '.join(missing)}")


class AckWriter(DataSourceWriter):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        check_schema(schema)
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write(self.options, iterator)


class AckStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        check_schema(schema)
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # Spark's name
        """Nothing to do: every task's markers were flushed before it ended."""
