"""kmq on Apache Spark (the `kmq[spark]` extra): the queue as a stream on Spark's own Kafka source, its micro-batches
acknowledged by the driver (a BATCH START before the handler, a BATCH END after), a queue sink, the markers as a
table, and the delivery audit. Imported only when used.

    import kmq.spark
    options = {"bootstrap.servers": "kafka:9092", "max_records_per_batch": 10_000}
    stream = kmq.spark.read_stream(spark, "orders", **options)
    stream.writeStream.foreachBatch(kmq.spark.foreach_batch(handle, "orders", **options)).start()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kmq.extras import require

require("kmq.spark", "spark")

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from kmq.spark.micro_batch import Handler, MarkedBatches
    from kmq.spark.report import AuditReport

__all__ = ["audit", "foreach_batch", "read_stream", "register"]


def read_stream(spark: SparkSession, queue: str, **options: Any) -> DataFrame:
    """The queue as a streaming DataFrame on Spark's Kafka source (`read_committed`), with columns partition,
    offset, key, value, headers, timestamp, redelivery_count. Options: bootstrap.servers, group, markers,
    msg_timeout_ms, max_records_per_batch, max_rows_per_task, kafka.* (librdkafka's names, security included),
    sasl_password_file. A new query starts at the kmq group's committed offsets; a restarted one at its checkpoint."""
    from kmq.spark.stream import read_stream as read

    return read(spark, queue, **options)


def foreach_batch(handler: Handler, queue: str, **options: Any) -> MarkedBatches:
    """For `.writeStream.foreachBatch(...)` of `read_stream(spark, queue, **options)` (the same queue and options):
    per micro-batch, its BATCH STARTs are durable before `handler(batch_df, batch_id)` sees a row; the handler returns
    None (every row ok) or a DataFrame of the rows that are not (partition, offset, status retry|reject, optional
    delay_ms, reason), which are nacked or dead-lettered; every other row is ENDed and the kmq group committed."""
    from kmq.spark.micro_batch import MarkedBatches
    from kmq.spark.stream import stream_options

    parsed = stream_options(queue, options)
    return MarkedBatches(handler, parsed, {**{k: str(v) for k, v in options.items()}, "queue": queue})


def register(spark: SparkSession) -> None:
    """Register the batch data sources on this session: "kmq" (read a topic, write into a queue), "kmq-markers" (the
    markers topic decoded) and "kmq-ack" (what foreach_batch writes a handler's not-ok rows with)."""
    from kmq.spark.ack_sink import KmqAckDataSource
    from kmq.spark.markers_source import KmqMarkersDataSource
    from kmq.spark.source import KmqDataSource

    for source in (KmqDataSource, KmqAckDataSource, KmqMarkersDataSource):
        spark.dataSource.register(source)


def audit(spark: SparkSession, parquet: str | None = None, **options: Any) -> AuditReport:
    """The delivery audit of a queue (see `kmq audit`); options as format("kmq") (`queue` among them), `parquet` a path
    for the per-partition rows."""
    from kmq.spark.audit_job import run_audit

    return run_audit(spark, {key: str(value) for key, value in options.items()}, parquet=parquet)
