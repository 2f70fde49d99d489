"""The Spark contenders of `kmq bench` (spark-kafka, spark-kmq): run on the broker the options name, print the table."""

from __future__ import annotations

import math
import uuid

from rich.console import Console
from rich.table import Table

from kmq.bench.options import BenchOptions
from kmq.bench.runner import open_cluster
from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster
from kmq.errors import ConfigError
from kmq.spark.bench import SPARK_KAFKA, SPARK_KMQ, SparkBenchResult, run_spark_bench

TARGET_RATIO = 0.8


def run_spark_contenders(
    contenders: tuple[str, ...], backend: str, bootstrap_servers: str | None, messages: int, partitions: int,
    size: int, repeat: int,
) -> None:  # fmt: skip
    """`kmq bench --contenders spark-kafka,spark-kmq`: on the cluster the options name, or an embedded broker."""
    unknown = [name for name in contenders if name not in (SPARK_KAFKA, SPARK_KMQ)]
    if unknown:
        raise ConfigError("--contenders", f"spark-kafka and spark-kmq run on their own, not with {', '.join(unknown)}")
    with open_cluster(BenchOptions(backend=backend, bootstrap_servers=bootstrap_servers)) as cluster:
        result = bench_spark(cluster, contenders, messages, partitions, size, repeat)
        broker = bootstrap_servers or f"embedded {backend}"
    print_spark_report(result, broker, messages, Console(highlight=False))


def bench_spark(cluster: KafkaCluster, contenders: tuple[str, ...], messages: int, partitions: int, size: int,
                repeat: int) -> SparkBenchResult:  # fmt: skip
    config: KmqConfig = cluster.config(f"bench-spark-{uuid.uuid4().hex[:8]}")
    return run_spark_bench(config, contenders, messages, partitions, size, repeat)


def print_spark_report(result: SparkBenchResult, broker: str, messages: int, console: Console) -> None:
    table = Table(title=f"Spark, {messages:,} rows per run, on {broker}")
    table.add_column("contender")
    table.add_column("rows/s (median)", justify="right")
    table.add_column("each round", justify="right")
    for name in (SPARK_KAFKA, SPARK_KMQ):
        if result.rates.get(name):
            rates = ", ".join(f"{rate:,.0f}" for rate in result.rates[name])
            table.add_row(name, f"{result.median(name):,.0f}", rates)
    console.print(table)
    if not math.isnan(result.ratio):
        status = "met" if result.ratio >= TARGET_RATIO else "missed"
        rounds = ", ".join(f"{ratio:.2f}" for ratio in result.round_ratios)
        console.print(
            f"spark-kmq ÷ spark-kafka: {result.ratio:.2f} (rounds: {rounds}; target ≥ {TARGET_RATIO}: {status})"
        )
