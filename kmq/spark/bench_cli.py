"""The Spark contenders of `kmq bench` (spark-kafka, spark-kmq): run on the broker the options name, print the table."""

from __future__ import annotations

import math
import uuid

from rich.console import Console
from rich.table import Table

from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster
from kmq.spark.bench import SPARK_KAFKA, SPARK_KMQ, SparkBenchResult, run_spark_bench

TARGET_RATIO = 0.8


def bench_spark(cluster: KafkaCluster, contenders: tuple[str, ...], messages: int, partitions: int, size: int,
                repeat: int) -> SparkBenchResult:  # fmt: skip
    config: KmqConfig = cluster.config(f"bench-spark-{uuid.uuid4().hex[:8]}")
    return run_spark_bench(config, contenders, messages, partitions, size, repeat)


def print_spark_report(result: SparkBenchResult, broker: str, messages: int, console: Console) -> None:
    table = Table(title=f"Spark, {messages:,} rows per run, on {broker}")
    table.add_column("contender")
    table.add_column("rows/s (median)", justify="right")
    table.add_column("runs", justify="right")
    for name in (SPARK_KAFKA, SPARK_KMQ):
        if result.rates.get(name):
            table.add_row(name, f"{result.median(name):,.0f}", str(len(result.rates[name])))
    console.print(table)
    if not math.isnan(result.ratio):
        status = "met" if result.ratio >= TARGET_RATIO else "missed"
        console.print(f"spark-kmq ÷ spark-kafka: {result.ratio:.2f} (target ≥ {TARGET_RATIO}: {status})")
