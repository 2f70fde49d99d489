"""kmq on Apache Spark (the `kmq[spark]` extra): the queue as a streaming source with per-row acknowledgement,
a queue sink, the markers as a table, and the delivery audit. Imported only when used.

    import kmq.spark
    kmq.spark.register(spark)
    stream = spark.readStream.format("kmq").option("bootstrap.servers", ...).option("queue", "orders").load()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from kmq.spark.report import AuditReport

__all__ = ["ack", "audit", "register"]


def register(spark: SparkSession) -> None:
    """Register the data sources "kmq", "kmq-ack" and "kmq-markers" on this session."""
    from kmq.spark.ack_sink import KmqAckDataSource
    from kmq.spark.markers_source import KmqMarkersDataSource
    from kmq.spark.source import KmqDataSource

    for source in (KmqDataSource, KmqAckDataSource, KmqMarkersDataSource):
        spark.dataSource.register(source)


def ack(batch_df: DataFrame, **options: Any) -> None:
    """Acknowledge the rows of a micro-batch (for `foreachBatch`); options as format("kmq-ack"), e.g.
    `ack(df, **{"bootstrap.servers": ..., "queue": ...})`. Every row is checked first: a bad one acks nothing."""
    from kmq.spark.ack_batch import ack_batch

    ack_batch(batch_df, {key: str(value) for key, value in options.items()})


def audit(spark: SparkSession, parquet: str | None = None, **options: Any) -> AuditReport:
    """The delivery audit of a queue (see `kmq audit`); options as format("kmq"), `parquet` a path for the
    per-partition rows."""
    from kmq.spark.audit_job import run_audit

    return run_audit(spark, {key: str(value) for key, value in options.items()}, parquet=parquet)
