"""`kmq worker MODULE:FUNCTION`: run a handler on every message of a queue (docs/workers.md)."""

from __future__ import annotations

import logging
import os
import signal
from typing import Annotated

import typer
from confluent_kafka import KafkaException

from kmq.cli.errors import fail, friendly_errors
from kmq.cli.options import BootstrapOption, QueueOption, build_config, parse_log_level
from kmq.cli.stopping import StopBeforeStart, Stopping
from kmq.errors import KmqError
from kmq.worker import Worker, WorkerConfig
from kmq.worker.http import WorkerHttp
from kmq.worker.loader import load_handler
from kmq.worker.ordering import Ordering

_log = logging.getLogger(__name__)
_defaults = WorkerConfig()
# After the handlers' grace period, how long flushing the markers and leaving the group may take before the worker
# gives up and exits 1 (a Kubernetes terminationGracePeriodSeconds must cover both).
CLOSE_BUDGET_MS = 20_000


@friendly_errors
def worker(
    handler: Annotated[str, typer.Argument(help="the handler, MODULE:FUNCTION (a plain or an async def function)")],
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
    concurrency: Annotated[int, typer.Option(min=1, help="handlers running at once")] = _defaults.concurrency,
    prefetch: Annotated[int, typer.Option(min=0, help="messages received ahead (0: 4 x concurrency)")] = 0,
    ordering: Annotated[
        Ordering,
        typer.Option(
            envvar="KMQ_WORKER_ORDERING",
            help="none: any order; partition: one at a time per partition; key: one at a time per key, in offset order",
        ),
    ] = _defaults.ordering,
    partition_limit: Annotated[
        int,
        typer.Option(
            min=0,
            envvar="KMQ_WORKER_PARTITION_LIMIT",
            help="ordered: messages held per partition before its fetching pauses (0: half of what the worker holds)",
        ),
    ] = _defaults.partition_limit,
    msg_timeout_ms: Annotated[
        int | None, typer.Option(min=1, help="lease of a message (env KMQ_MSG_TIMEOUT_MS); extended while it runs")
    ] = None,
    max_processing_ms: Annotated[
        int, typer.Option(min=1, help="longest a message is kept, extensions included; then it is retried")
    ] = _defaults.max_processing_ms,
    shutdown_grace_ms: Annotated[
        int, typer.Option(min=0, help="time in-flight handlers get to finish on SIGTERM/SIGINT")
    ] = _defaults.shutdown_grace_ms,
    breaker_threshold: Annotated[
        float, typer.Option(min=0.01, max=1.0, help="failure rate that stops receiving")
    ] = _defaults.breaker_threshold,
    breaker_window_ms: Annotated[
        int, typer.Option(min=1, help="window of that failure rate")
    ] = _defaults.breaker_window_ms,
    metrics_port: Annotated[
        int | None, typer.Option(min=0, max=65535, help="serve Prometheus /metrics and /healthz on this port")
    ] = None,
    stall_timeout_ms: Annotated[
        int,
        typer.Option(
            min=1,
            envvar="KMQ_WORKER_STALL_TIMEOUT_MS",
            help="/healthz fails after this long without a message settled while messages are held",
        ),
    ] = _defaults.stall_timeout_ms,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error")] = "info",
) -> None:
    """Run HANDLER on every message: return = processed, raise kmq.Retry = nack, kmq.Reject = dead letter,
    any other exception = retry with backoff. SIGTERM/SIGINT stop it gracefully; a second one at once."""
    stopping = Stopping("worker", shutdown_grace_ms + CLOSE_BUDGET_MS)
    _set_log_level(log_level)
    try:
        config = build_config(bootstrap_servers, queue, msg_timeout_ms=msg_timeout_ms)
        settings = WorkerConfig(
            concurrency=concurrency,
            prefetch=prefetch,
            ordering=ordering,
            partition_limit=partition_limit,
            max_processing_ms=max_processing_ms,
            shutdown_grace_ms=shutdown_grace_ms,
            breaker_threshold=breaker_threshold,
            breaker_window_ms=breaker_window_ms,
            stall_timeout_ms=stall_timeout_ms,
        )
        _work(stopping, Worker(load_handler(handler), config, settings=settings), handler, metrics_port)
    except StopBeforeStart:
        _log.info("worker stopped during its start-up")


def _work(stopping: Stopping, runtime: Worker, handler: str, metrics_port: int | None) -> None:
    if metrics_port is not None:
        try:
            WorkerHttp(runtime, metrics_port).start()  # a daemon thread: it ends with the process
        except OSError as e:  # the port is taken, or below 1024 without the right
            raise fail(f"--metrics-port {metrics_port}: {e.strerror or e}") from e
    stopping.running(lambda signum: _on_signal(runtime, signum))
    topic = runtime.config.queue_topic
    settings = runtime.settings
    _log.info(
        "worker on %s: %s, concurrency %d, ordering %s", topic, handler, settings.concurrency, settings.ordering.value
    )
    try:
        runtime.run()
    except (KmqError, KafkaException) as e:
        if stopping.requested and not runtime.ready.is_set():  # asked to stop: a start-up cut short is no failure
            _log.warning("worker stopped during its start-up, which failed: %s", e)
            return
        raise  # one line of error (friendly_errors), exit 1; a dead thread's traceback is logged already
    except Exception as e:
        _log.critical("worker stopped by an unexpected error (it left its group; restart it)", exc_info=True)
        raise typer.Exit(1) from e
    stopping.watch.disarm()
    _log.info("worker stopped cleanly")


def _on_signal(runtime: Worker, signum: int) -> None:
    name = signal.Signals(signum).name
    if runtime.stopping:
        _log.warning("second %s: exiting at once (unfinished messages come back after their deadline)", name)
        os._exit(128 + signum)
    _log.info("received %s: finishing in-flight messages (a second signal exits at once)", name)
    runtime.stop()


def _set_log_level(level: str) -> None:
    logging.getLogger("kmq").setLevel(parse_log_level(level))


def register(app: typer.Typer) -> None:
    app.command("worker")(worker)
