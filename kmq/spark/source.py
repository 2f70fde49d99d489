"""`format("kmq")`: the queue as a streaming source with START markers, a batch source, and a batch sink.

Spark unpickles the reader in every Python process it spawns for this source (the driver's offset runner, each
executor's worker), and importing this module is part of every query's start-up: what only the driver's offsets
(`positions`, the admin client), the batch reader or the sink use is imported where it is used."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from kmq.spark.offsets import OffsetRange, SourceOffset, from_offset, limit_end, split, to_offset
from kmq.spark.options import SourceOptions
from kmq.spark.reading import read_range, read_to_end, with_starts
from kmq.spark.rows import QUEUE_SCHEMA, to_batch

if TYPE_CHECKING:
    from kmq.spark.positions import QueuePositions


class KmqDataSource(DataSource):
    """Options: bootstrap.servers, queue, group, markers, msg_timeout_ms, marker_format, max_records_per_batch,
    max_rows_per_task, kafka.* (see kmq.spark.options); `topic` reads another topic (e.g. the dead letters) in a
    batch query."""

    @classmethod
    def name(cls) -> str:
        return "kmq"

    def schema(self) -> str:
        return QUEUE_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KmqStreamReader(SourceOptions.parse(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        options = SourceOptions.parse(self.options)
        return TopicReader(options, self.options.get("topic") or options.config.queue_topic)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return QueueWriter(SourceOptions.parse(self.options))


class KmqStreamReader(DataSourceStreamReader):
    """Offsets and commits on the driver; `read()` on executors writes each chunk's STARTs before yielding it."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._positions: QueuePositions | None = None
        self._committed: dict[int, int] = {}
        self._initial: SourceOffset | None = None

    def __getstate__(self) -> dict[str, Any]:  # executors get the options, never the driver's consumer
        return {"options": self.options, "_positions": None, "_committed": {}, "_initial": None}

    def initialOffset(self) -> SourceOffset:
        """A new query starts where the kmq group stands; a restarted one from Spark's checkpoint. Spark asks twice
        as the first micro-batch is planned: both get the first answer (one group look-up, one stable start)."""
        if self._initial is None:
            positions = self._driver().committed()
            self._initial, self._committed = to_offset(positions), positions  # the group stands there already
        return self._initial

    def latestOffset(self, start: SourceOffset, limit: ReadLimit) -> SourceOffset:
        first = from_offset(start)
        # `start` ends the last completed micro-batch (Spark plans one at a time, and a restart re-runs an unfinished
        # one without asking): its STARTs are durable, so the group may move there now. Spark's own commit(end)
        # comes only once a later batch has data, which would leave the group (and tracker lag) one batch behind.
        self._commit(first)
        ends = {p: max(end, first.get(p, 0)) for p, end in self._driver().ends().items()}
        if isinstance(limit, ReadMaxRows):
            ends = limit_end(first, ends, limit.max_rows)
        return to_offset(ends)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_records_per_batch
        return ReadMaxRows(limit) if limit > 0 else ReadAllAvailable()

    def partitions(self, start: SourceOffset, end: SourceOffset) -> Sequence[InputPartition]:
        return [
            InputPartition(span) for span in split(from_offset(start), from_offset(end), self.options.max_rows_per_task)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        span: OffsetRange = partition.value
        config = self.options.config
        chunks = read_range(config, config.queue_topic, span, self.options.chunk_size)
        for chunk in with_starts(config, chunks, config.msg_timeout_ms):
            yield to_batch(chunk)

    def commit(self, end: SourceOffset) -> None:
        self._commit(from_offset(end))

    def stop(self) -> None:
        if self._positions is not None:
            self._positions.close()
            self._positions = None

    def _commit(self, positions: dict[int, int]) -> None:
        if positions != self._committed:
            self._driver().commit(positions)
            self._committed = positions

    def _driver(self) -> QueuePositions:
        if self._positions is None:
            from kmq.spark.positions import QueuePositions  # the driver's only (see the module's docstring)

            self._positions = QueuePositions(self.options.config)
        return self._positions


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
