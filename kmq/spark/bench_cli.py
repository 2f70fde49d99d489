"""The Spark contenders of `kmq bench` (spark-kafka, spark-kmq): run on the broker the options name, print the table
and, with --json, write every run's figures."""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kmq.bench.options import BenchOptions
from kmq.bench.runner import open_cluster
from kmq.bench.spark_master import DEFAULT_MASTER, BenchMaster
from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster
from kmq.errors import ConfigError
from kmq.spark.bench import (
    HANDLER,
    ROWS_PER_BATCH,
    ROWS_PER_TASK,
    SPARK_KAFKA,
    SPARK_KMQ,
    SparkBenchResult,
    run_spark_bench,
)
from kmq.spark.bench_figures import KINDS, Kind, median_ratio
from kmq.spark.standalone import standalone_cluster

TARGET_RATIO = 0.95
LOCAL_MASTER = BenchMaster(DEFAULT_MASTER)
_TITLES: dict[Kind, str] = {"end_to_end": "end to end from start()", "steady": "steady state (batches after the first)"}


def run_spark_contenders(
    contenders: tuple[str, ...], backend: str, bootstrap_servers: str | None, messages: int, partitions: int,
    size: int, repeat: int, json_file: Path | None = None, command: str = "",
    master: BenchMaster = LOCAL_MASTER,
) -> None:  # fmt: skip
    """`kmq bench --contenders spark-kafka,spark-kmq`: on the cluster the options name, or an embedded broker; Spark
    on `master` (`standalone`: a master and two workers started here for the bench, stopped after it)."""
    unknown = [name for name in contenders if name not in (SPARK_KAFKA, SPARK_KMQ)]
    if unknown:
        raise ConfigError("--contenders", f"spark-kafka and spark-kmq run on their own, not with {', '.join(unknown)}")
    with open_cluster(BenchOptions(backend=backend, bootstrap_servers=bootstrap_servers)) as cluster:
        with spark_master(master) as (url, started_here):
            result = bench_spark(cluster, contenders, messages, partitions, size, repeat, url, started_here)
        broker = bootstrap_servers or f"embedded {backend}"
    where = f"{broker}, Spark {master.url}"
    print_spark_report(result, where, messages, Console(highlight=False))
    if json_file is not None:
        options = {"messages": messages, "partitions": partitions, "size": size, "repeat": repeat, "broker": broker,
                   "master": master.url, "rows_per_batch": ROWS_PER_BATCH, "rows_per_task": ROWS_PER_TASK}  # fmt: skip
        json_file.write_text(json.dumps(spark_report_dict(result, command, options), indent=2) + "\n", encoding="utf-8")


def bench_spark(cluster: KafkaCluster, contenders: tuple[str, ...], messages: int, partitions: int, size: int,
                repeat: int, master_url: str = DEFAULT_MASTER,
                started_here: bool = False) -> SparkBenchResult:  # fmt: skip
    config: KmqConfig = cluster.config(f"bench-spark-{uuid.uuid4().hex[:8]}")
    return run_spark_bench(config, contenders, messages, partitions, size, repeat, master_url, started_here)


@contextmanager
def spark_master(master: BenchMaster) -> Iterator[tuple[str, bool]]:
    """The master URL to use, and whether its cluster was started here (`standalone`: stopped on leaving)."""
    if not master.standalone:
        yield master.url, False
        return
    with tempfile.TemporaryDirectory(prefix="kmq-bench-spark-") as work_dir, standalone_cluster(Path(work_dir)) as made:
        yield made.master_url, True


def print_spark_report(result: SparkBenchResult, broker: str, messages: int, console: Console) -> None:
    for kind in KINDS:
        table = Table(title=f"Spark, {messages:,} rows per run, on {broker}: rows/s {_TITLES[kind]}")
        table.add_column("contender")
        table.add_column("rows/s (median)", justify="right")
        table.add_column("each round", justify="right")
        for name in (SPARK_KAFKA, SPARK_KMQ):
            if result.runs.get(name):
                rates = ", ".join(_rate(rate) for rate in result.rates(name, kind))
                table.add_row(name, _rate(result.median(name, kind)), rates)
        console.print(table)
        ratio = result.ratio(kind)
        if not math.isnan(ratio):
            status = "met" if ratio >= TARGET_RATIO else "missed"
            rounds = ", ".join(f"{r:.2f}" for r in result.round_ratios(kind))
            console.print(
                f"spark-kmq ÷ spark-kafka, {_TITLES[kind]}: {ratio:.3f} (rounds: {rounds}; "
                f"target ≥ {TARGET_RATIO}: {status})"
            )
    console.print(f"handler of both: {HANDLER}")
    for name, title in (("offsets_ms", "reading its offset log"), ("marker_ms", "writing its markers, committing")):
        medians = [run.median_cost_ms(name) for run in result.runs.get(SPARK_KMQ, [])]
        if medians:
            each = ", ".join(f"{m:.0f}" for m in medians)
            console.print(f"spark-kmq per micro-batch, {title}: median {median_ratio(medians):.0f} ms (rounds: {each})")


def spark_report_dict(result: SparkBenchResult, command: str, options: dict[str, Any]) -> dict[str, Any]:
    """Every run's figures, the medians and both ratios per round; NaN (not measured) becomes null."""
    data = {
        "command": command,
        "options": options,
        "runs": {name: [dataclasses.asdict(run) for run in runs] for name, runs in result.runs.items()},
        "rates": {name: {kind: result.rates(name, kind) for kind in KINDS} for name in result.runs},
        "ratios": {kind: {"median": result.ratio(kind), "rounds": result.round_ratios(kind)} for kind in KINDS},
        "target": TARGET_RATIO,
        "handler": HANDLER,
    }
    return {key: _no_nan(value) for key, value in data.items()}


def _no_nan(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return value


def _rate(rate: float) -> str:
    return "-" if math.isnan(rate) else f"{rate:,.0f}"
