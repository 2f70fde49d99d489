"""The delivery audit as a Spark batch job over the queue, markers and dead-letter topics (any master, any size).

A *message* is a first delivery and its redelivered copies: one chain, keyed by (partition, original offset). Its
last delivery (highest redelivery count) decides its state: dead-lettered (on D, whatever else), acked (its winning
marker is an END), pending (a START), and otherwise never started: unconsumed at or past the group's committed
offset, unaccounted below it (the tracker can no longer redeliver it: a message lost).

Offsets the markers name that hold no record (a transaction marker, an aborted record: PROTOCOL.md) are no message:
they are counted apart (`no_record`), those between the partition's log start and its end; below the log start
retention removed what was there.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # Spark's convention

from kmq import headers as h
from kmq.spark.options import SourceOptions
from kmq.spark.positions import QueuePositions
from kmq.spark.report import AuditReport, report_from_rows

_CHAIN = ["partition", "original_offset"]


def run_audit(
    spark: SparkSession, options: Mapping[str, str], now_ms: int | None = None, parquet: str | None = None
) -> AuditReport:
    """The report; with `parquet`, the per-partition rows are also written there (dead_reasons as a map)."""
    parsed = SourceOptions.parse(options)
    cached: list[DataFrame] = []
    try:
        frame, reasons = audit_frames(spark, options, now_ms, cached)
        by_partition: dict[int, dict[str, int]] = {}
        for row in reasons.collect():
            by_partition.setdefault(row["partition"], {})[row["reason"]] = row["count"]
        rows = [{**row.asDict(), "dead_reasons": by_partition.get(row["partition"], {})} for row in frame.collect()]
        if parquet:
            reason_maps = spark.createDataFrame(
                [(p, reasons) for p, reasons in by_partition.items()], "partition int, dead_reasons map<string, long>"
            )
            frame.join(reason_maps, "partition", "left").write.mode("overwrite").parquet(parquet)
    finally:
        for frame_in_cache in cached:
            frame_in_cache.unpersist()
    return report_from_rows(parsed.config.queue_topic, rows)


def audit_frames(
    spark: SparkSession, options: Mapping[str, str], now_ms: int | None = None, cached: list[DataFrame] | None = None
) -> tuple[DataFrame, DataFrame]:
    """(one row per queue partition, dead letters counted per partition and reason). With `cached`, the queue and
    the per-message chains are persisted (and listed there for the caller to unpersist): both results then come
    from one read of each topic, not one per result and use."""

    def keep(frame: DataFrame) -> DataFrame:
        if cached is None:
            return frame
        cached.append(frame.persist())
        return frame

    config = SourceOptions.parse(options).config
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    bounds = _bounds(spark, options)
    committed = bounds.select("partition", "committed_offset")
    queue = keep(_queue(spark, options))
    markers = keep(_winning_markers(spark, options))
    deliveries = queue.join(markers, ["partition", "offset"], "left")
    chains = keep(
        deliveries.groupBy(*_CHAIN)
        .agg(F.max_by(F.struct("offset", "state", "started_at"), F.struct("redelivery_count", "offset")).alias("last"))
        .join(_dead_letters(spark, options, config.queue_topic, config.dead_letter_topic), _CHAIN, "left")
        .join(committed, "partition")
        .withColumn("status", _status())
    )
    per_chain = chains.groupBy("partition").agg(
        *(
            F.count_if(F.col("status") == name).alias(name)
            for name in ("acked", "pending", "unaccounted", "unconsumed")
        ),
        F.count_if(F.col("status") == "dead").alias("dead_lettered"),
        F.min(F.when(F.col("status") == "pending", F.col("last.started_at"))).alias("oldest_start"),
    )
    per_record = queue.groupBy("partition").agg(
        F.count("*").alias("messages"),
        F.count_if(~F.col("is_copy")).alias("first_deliveries"),
        F.count_if(F.col("is_copy")).alias("redelivered_copies"),
        F.max("redelivery_count").alias("max_redelivery_count"),
    )
    in_log = (F.col("offset") >= F.col("log_start")) & (F.col("offset") < F.col("log_end"))
    no_record = (
        markers.select("partition", "offset")
        .join(queue.select("partition", "offset"), ["partition", "offset"], "left_anti")
        .join(bounds, "partition")
        .groupBy("partition")
        .agg(F.count_if(in_log).alias("no_record"))
    )
    age = F.lit(now_ms) - (F.unix_micros("oldest_start") / 1000).cast("long")
    frame = (
        committed.join(per_record, "partition", "left")
        .join(per_chain, "partition", "left")
        .join(no_record, "partition", "left")
        .na.fill(0)
        .withColumn("oldest_pending_age_ms", F.when(F.col("oldest_start").isNotNull(), F.greatest(age, F.lit(0))))
        .drop("oldest_start")
        .orderBy("partition")
    )
    reasons = chains.where(F.col("status") == "dead").groupBy("partition", "reason").count()
    return frame, reasons


def _status() -> Column:
    state = F.col("last.state")
    return (
        F.when(F.col("reason").isNotNull(), "dead")
        .when(state == "end", "acked")
        .when(state == "start", "pending")
        .when(F.col("last.offset") < F.col("committed_offset"), "unaccounted")
        .otherwise("unconsumed")
    )


def _header(name: str) -> Column:
    """The last value of header `name`, or null."""
    found = F.filter("headers", lambda pair: pair["key"] == F.lit(name))
    return F.when(F.size(found) > 0, F.element_at(found, -1)["value"])


def _int(column: Column) -> Column:
    """A big-endian int32/int64 header value (non-negative, as offsets and partitions are)."""
    return F.conv(F.hex(column), 16, 10).cast("long")


def _queue(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    original = F.when(F.length(_header(h.ORIGINAL_OFFSET)) == 8, _int(_header(h.ORIGINAL_OFFSET)))
    return (
        spark.read.format("kmq")
        .options(**options)
        .load()
        .select(
            "partition",
            "offset",
            "redelivery_count",
            _header(h.REDELIVERY_COUNT).isNotNull().alias("is_copy"),
            F.coalesce(original, F.col("offset")).alias("original_offset"),
        )
    )


def _winning_markers(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """Per queue offset, the marker with the highest marker offset (PROTOCOL.md): its kind and timestamp."""
    markers = spark.read.format("kmq-markers").options(**options).load().where(F.col("kind").isin("start", "end"))
    return (
        markers.groupBy("queue_partition", "queue_offset")
        .agg(F.max_by(F.struct("kind", "timestamp"), "marker_offset").alias("m"))
        .select(
            F.col("queue_partition").alias("partition"),
            F.col("queue_offset").alias("offset"),
            F.col("m.kind").alias("state"),
            F.col("m.timestamp").alias("started_at"),
        )
    )


def _dead_letters(spark: SparkSession, options: Mapping[str, str], queue: str, topic: str) -> DataFrame:
    """Per message of this queue on D, the reason of its newest dead letter."""
    dead = spark.read.format("kmq").options(**{**options, "topic": topic}).load()
    return (
        dead.where(_header(h.ORIGINAL_TOPIC).cast("string") == F.lit(queue))
        .select(
            _int(_header(h.ORIGINAL_PARTITION)).cast("int").alias("partition"),
            _int(_header(h.ORIGINAL_OFFSET)).alias("original_offset"),
            F.coalesce(_header(h.DLQ_REASON).cast("string"), F.lit("(no reason)")).alias("reason"),
            F.struct(F.col("partition").alias("p"), F.col("offset").alias("o")).alias("at"),
        )
        .groupBy(*_CHAIN)
        .agg(F.max_by("reason", "at").alias("reason"))
    )


def _bounds(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """Every queue partition with the group's committed offset (its first offset when none is committed), its log
    start and its end."""
    positions = QueuePositions(SourceOptions.parse(options).config)
    try:
        committed = positions.committed()
        rows = [(p, offset, positions.low(p), positions.high(p)) for p, offset in sorted(committed.items())]
    finally:
        positions.close()
    return spark.createDataFrame(rows, "partition int, committed_offset long, log_start long, log_end long")
