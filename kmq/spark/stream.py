"""`kmq.spark.read_stream`: the queue as a streaming DataFrame on Spark's own Kafka source.

The rows never pass through Python: Spark's Kafka source (`spark-sql-kafka-0-10` of the running Spark's version)
reads them in the JVM with `read_committed`, and the redelivery count is a Spark expression over the headers. The
markers are written per micro-batch by the driver (`kmq.spark.foreach_batch`), not here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # Spark's convention

from kmq import headers as h
from kmq.spark.java_kafka import java_kafka_options
from kmq.spark.options import SourceOptions
from kmq.spark.python_exec import ensure_python

COLUMNS = ("partition", "offset", "key", "value", "headers", "timestamp", "redelivery_count")
_INT32_MAX = 2**31 - 1


def stream_options(queue: str, options: Mapping[str, object]) -> SourceOptions:
    """The options of `read_stream` and `foreach_batch` (strings or numbers), the queue given apart."""
    return SourceOptions.parse({**{key: str(value) for key, value in options.items()}, "queue": queue})


def read_stream(spark: SparkSession, queue: str, **options: object) -> DataFrame:
    """A streaming DataFrame of the queue with columns `COLUMNS`. A new query starts where the kmq group stands
    (its committed offsets, looked up now on the driver); a restarted one where Spark's checkpoint says."""
    ensure_python(spark)
    parsed = stream_options(queue, options)
    reader = spark.readStream.format("kafka").options(**kafka_source_options(parsed, _starting_offsets(parsed)))
    return reader.load().select(*COLUMNS[:-1], redelivery_count(F.col("headers")).alias("redelivery_count"))


def kafka_source_options(options: SourceOptions, starting_offsets: Mapping[int, int]) -> dict[str, str]:
    """The options of Spark's Kafka source for the queue, starting at `starting_offsets` (partition -> offset)."""
    topic = options.config.queue_topic
    source = {
        **java_kafka_options(options.config),
        "subscribe": topic,
        "startingOffsets": json.dumps({topic: {str(p): o for p, o in sorted(starting_offsets.items())}}),
        "kafka.isolation.level": "read_committed",
        "includeHeaders": "true",
        "maxRecordsPerPartition": str(options.max_rows_per_task),
    }
    if options.max_records_per_batch > 0:
        source["maxOffsetsPerTrigger"] = str(options.max_records_per_batch)
    return source


def redelivery_count(headers: Column) -> Column:
    """The `kmq-redelivery-count` header (its last value) as an int: one byte, or a big-endian int32 (PROTOCOL.md);
    0 when absent, of another length, or negative — as `kmq.headers.decode_count` reads it.

    Plain array functions only, no lambda: a higher-order function (`filter`) is interpreted row by row and keeps
    the whole projection out of Spark's generated code, and this column is computed for every row a handler reads.
    A first delivery (no headers) costs one size check."""
    from_end = F.array_position(F.reverse(headers.getField("key")), F.lit(h.REDELIVERY_COUNT))  # 1-based; 0: none
    value = F.element_at(F.reverse(headers.getField("value")), F.when(from_end > 0, from_end).cast("int"))
    number = F.conv(F.hex(value), 16, 10).cast("long")
    count = (
        F.when(F.length(value) == 1, number)
        .when((F.length(value) == 4) & (number <= _INT32_MAX), number)
        .otherwise(F.lit(0))
    )
    found = F.coalesce(F.when(from_end > 0, count), F.lit(0)).cast("int")
    return F.when(F.size(headers) <= 0, F.lit(0)).otherwise(found)  # size is -1 for null headers


def _starting_offsets(options: SourceOptions) -> dict[int, int]:
    from kmq.spark.positions import QueuePositions

    positions = QueuePositions(options.config)
    try:
        return positions.committed()
    finally:
        positions.close()
