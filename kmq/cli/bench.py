"""`kmq bench`: plain consumer, kmq, share groups, tracker and REST facade, measured side by side in one run."""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from kmq.bench.jsonout import write_json
from kmq.bench.options import ALL_CONTENDERS, CONTENDERS, KMQ_BATCH, WORKER, WORKER_KEY, BenchOptions
from kmq.bench.progress import RichDisplay
from kmq.bench.runner import run_bench
from kmq.bench.spark_master import DEFAULT_MASTER, parse_master
from kmq.bench.table import print_report
from kmq.cli.console import OutputConsole
from kmq.cli.errors import friendly_errors
from kmq.cli.options import BackendOption, BootstrapOption, resolve_backend
from kmq.errors import BenchError, ConfigError
from kmq.extras import require

_defaults = BenchOptions()
_SPARK_CONTENDERS = ("spark-kafka", "spark-kmq")
_EVERY_CONTENDER = (*ALL_CONTENDERS, *_SPARK_CONTENDERS)


@friendly_errors
def bench(
    backend: BackendOption = None,
    bootstrap_servers: BootstrapOption = None,
    messages: Annotated[int, typer.Option(min=1, help="messages per consumer run")] = _defaults.messages,
    partitions: Annotated[int, typer.Option(min=1, help="partitions of each queue")] = _defaults.partitions,
    size: Annotated[int, typer.Option(min=0, help="message value size, bytes")] = _defaults.size,
    batch: Annotated[int, typer.Option(min=1, help="messages per receive / consume")] = _defaults.batch,
    repeat: Annotated[int, typer.Option(min=1, help="runs of each contender (alternating); medians")] = 3,
    contenders: Annotated[str, typer.Option(help=f"comma-separated, from {','.join(_EVERY_CONTENDER)}")] = ",".join(
        CONTENDERS
    ),
    tracker_pending: Annotated[
        int, typer.Option(min=1, help="START markers the tracker contender ingests")
    ] = _defaults.tracker_pending,
    http_messages: Annotated[
        int, typer.Option(min=1, help="messages through the REST facade")
    ] = _defaults.http_messages,
    json_file: Annotated[Path | None, typer.Option("--json", help="write every figure to this JSON file")] = None,
    plot_file: Annotated[Path | None, typer.Option("--plot", help="draw throughput and latency bars (PNG)")] = None,
    marker_format: Annotated[
        str, typer.Option("--marker-format", help="markers of the tracker and http contenders: kmq or batch")
    ] = "batch",
    warm_up: Annotated[
        bool, typer.Option(help="run every contender once, not counted, before the measured rounds (a cold broker)")
    ] = _defaults.warm_up,
    profile_dir: Annotated[
        Path | None,
        typer.Option("--profile", help="pyinstrument profiles of the consumer runs go to this directory"),
    ] = None,
    work_us: Annotated[
        str,
        typer.Option(
            help="CPU each handler burns per message, µs; a list (0,20) runs every consumer contender at each, in the "
            "same rounds (named plain@20us ...)"
        ),
    ] = "0",
    master: Annotated[
        str,
        typer.Option(
            help="Spark contenders' master: local[N], spark://host:port, or standalone (a master and two "
            "workers started on this machine for the bench)"
        ),
    ] = DEFAULT_MASTER,
) -> None:
    """Measure kmq against a plain Kafka consumer and Kafka share groups on one broker, alternating the contenders.

    On an embedded broker unless --bootstrap-servers (or KMQ_BOOTSTRAP_SERVERS) names a cluster.
    """
    require("kmq bench", "bench")
    spark_master = parse_master(master)
    if set(_contenders(contenders)) & set(_SPARK_CONTENDERS):  # a Spark session of their own: kmq/spark/bench_cli.py
        from kmq.spark.bench_cli import run_spark_contenders

        bootstrap = bootstrap_servers or os.environ.get("KMQ_BOOTSTRAP_SERVERS") or None
        chosen = resolve_backend(backend) if bootstrap is None else (backend or "kafka")
        command = "kmq " + shlex.join(sys.argv[1:])
        names = _contenders(contenders)
        run_spark_contenders(names, chosen, bootstrap, messages, partitions, size, repeat, json_file, command,
                             spark_master)  # fmt: skip
        return
    if spark_master.url != DEFAULT_MASTER:
        raise ConfigError("--master", "only the Spark contenders (spark-kafka, spark-kmq) run on a Spark master")
    options = BenchOptions(
        messages=messages,
        partitions=partitions,
        size=size,
        batch=batch,
        repeat=repeat,
        backend=resolve_backend(backend) if bootstrap_servers is None else (backend or "kafka"),
        bootstrap_servers=bootstrap_servers or os.environ.get("KMQ_BOOTSTRAP_SERVERS") or None,
        contenders=_contenders(contenders),
        tracker_pending=tracker_pending,
        http_messages=http_messages,
        profile_dir=None if profile_dir is None else str(_profile_dir(profile_dir)),
        marker_format=marker_format,
        warm_up=warm_up,
        work_us=_work_us(work_us),
    )
    with RichDisplay(OutputConsole(stderr=True, soft_wrap=False)) as display:
        report = run_bench(options, display)
    console = OutputConsole(soft_wrap=False)  # a file or pipe: the whole table, not 80 columns of it
    print_report(report, console)
    command = "kmq " + shlex.join(sys.argv[1:])
    if json_file is not None:
        write_json(report, json_file, command)
    if plot_file is not None:
        from kmq.bench.plot import write_plot

        write_plot(report, plot_file)


def _profile_dir(path: Path) -> Path:
    """Checked before any run: the profiler is installed and the directory exists."""
    if importlib.util.find_spec("pyinstrument") is None:
        raise BenchError("--profile needs pyinstrument: pip install 'kmq[bench]'")
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def _contenders(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise ConfigError("--contenders", f"name at least one of {', '.join(_EVERY_CONTENDER)}")
    if WORKER_KEY in names and WORKER not in names:
        names = (*names, WORKER)  # the key-ordered worker is measured against the unordered one, in the same rounds
    if WORKER in names and KMQ_BATCH not in names:
        names = (KMQ_BATCH, *names)  # the worker is measured against the bare client (batch markers both)
    return names


def _work_us(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(value) for value in text.split(",") if value.strip())
    except ValueError as e:
        raise ConfigError("--work-us", f"give whole µs, comma-separated (got {text!r})") from e


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
