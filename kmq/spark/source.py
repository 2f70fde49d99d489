"""`format("kmq")`: a topic (the queue by default) as a batch source, and a batch sink into the queue.

Streaming is not here: `kmq.spark.read_stream` reads the queue through Spark's own Kafka source, and
`kmq.spark.foreach_batch` writes the markers from the driver. Spark unpickles the reader in every Python worker it
spawns for this source: what only the driver (the admin client) or the sink use is imported where it is used."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from kmq.spark.options import SourceOptions
from kmq.spark.reading import read_to_end
from kmq.spark.rows import QUEUE_SCHEMA, to_batch


class KmqDataSource(DataSource):
    """Options: bootstrap.servers, queue, kafka.*, sasl_password_file (see kmq.spark.options); `topic` reads another
    topic (e.g. the dead letters)."""

    @classmethod
    def name(cls) -> str:
        return "kmq"

    def schema(self) -> str:
        return QUEUE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        options = SourceOptions.parse(self.options)
        return TopicReader(options, self.options.get("topic") or options.config.queue_topic)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return QueueWriter(SourceOptions.parse(self.options))


class TopicReader(DataSourceReader):
    """A batch read of a whole topic (the queue by default): no markers, no commits; one task per partition."""

    def __init__(self, options: SourceOptions, topic: str) -> None:
        self.options = options
        self.topic = topic

    def partitions(self) -> Sequence[InputPartition]:
        from kmq.admin import topic_partitions  # the driver's only (see the module's docstring)

        return [InputPartition(p) for p in range(topic_partitions(self.options.config, self.topic))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        for chunk in read_to_end(self.options.config, self.topic, partition.value, self.options.chunk_size):
            yield to_batch(chunk)


class QueueWriter(DataSourceWriter):
    """`df.write.format("kmq")`: columns value, optional key, headers, partition; every row acknowledged (acks=all)
    before the task ends."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        from kmq.spark.sending import send_rows  # this sink's only (see the module's docstring)

        return SentRows(send_rows(self.options.config, iterator))


class SentRows(WriterCommitMessage):
    def __init__(self, count: int) -> None:
        self.count = count
