"""`kmq audit`: the delivery audit of a queue, as a Spark batch job (needs the `kmq[spark]` extra)."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from kmq.cli.console import OutputConsole
from kmq.cli.errors import fail, friendly_errors
from kmq.cli.options import BootstrapOption, QueueOption, build_config

_console = OutputConsole()


@friendly_errors
def audit(
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
    group: Annotated[str | None, typer.Option(help="the kmq consumer group (default: QUEUE__workers)")] = None,
    master: Annotated[str, typer.Option(help="Spark master URL (any master works)")] = "local[*]",
    json_output: Annotated[bool, typer.Option("--json", help="print the report as JSON instead of a table")] = False,
    parquet: Annotated[str | None, typer.Option(help="also write the per-partition report as Parquet here")] = None,
) -> None:
    """Account for every message of a queue from its topics: acked, pending, dead-lettered, or unaccounted.

    Exit 0 when nothing is unaccounted, 1 otherwise (or on error)."""
    config = build_config(bootstrap_servers, queue, **({"group_id": group} if group else {}))
    try:
        from pyspark.sql import SparkSession

        import kmq.spark
        from kmq.spark.audit_job import run_audit
    except ImportError as e:
        raise fail(f"kmq audit needs Spark: pip install 'kmq[spark]' ({e})") from e
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    borrowed = SparkSession.getActiveSession()  # in a running Spark application: use it, leave it running
    spark = borrowed or SparkSession.builder.master(master).appName(f"kmq audit {config.queue_topic}").getOrCreate()
    try:
        if borrowed is None:
            spark.sparkContext.setLogLevel("ERROR")
        kmq.spark.register(spark)
        options = {"bootstrap.servers": config.bootstrap_servers, "queue": config.queue_topic,
                   "group": config.group_id, "markers": config.markers_topic,
                   "dead_letters": config.dead_letter_topic}  # fmt: skip
        options.update({f"kafka.{k}": str(v) for k, v in config.kafka_settings().items() if k != "bootstrap.servers"})
        report = run_audit(spark, options, parquet=parquet)
    finally:
        if borrowed is None:
            spark.stop()
    _console.print(report.to_json() if json_output else report.table())
    if not report.ok:
        raise fail(f"{report.total('unaccounted')} messages are unaccounted for (never started, below the commit)")


def register(app: typer.Typer) -> None:
    app.command("audit")(audit)
