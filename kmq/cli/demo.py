"""`kmq demo`: the main job — a queue that keeps its promise, shown and verified on one machine."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Annotated

import typer

from kmq.cli.console import OutputConsole
from kmq.cli.errors import fail, friendly_errors
from kmq.cli.options import BackendOption, resolve_backend
from kmq.demo import DemoOptions, run_demo
from kmq.extras import require

_console = OutputConsole(soft_wrap=False)
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@friendly_errors
def demo(
    messages: Annotated[int, typer.Option("--messages", "-n", min=1, help="numbered messages to send")] = 10_000,
    workers: Annotated[int, typer.Option(min=1, help="worker processes")] = 3,
    trackers: Annotated[int, typer.Option(min=1, help="tracker replicas (they share the partitions)")] = 2,
    partitions: Annotated[int, typer.Option(min=1, help="partitions of the queue and markers topics")] = 8,
    drop_rate: Annotated[
        float, typer.Option(min=0.0, max=0.99, help="fraction of deliveries workers leave unacknowledged")
    ] = 0.1,
    poison_every: Annotated[
        int, typer.Option(min=0, help="workers reject every message whose number is a multiple of this (0: none)")
    ] = 997,
    msg_timeout_ms: Annotated[
        int, typer.Option(min=1, help="time before an unacknowledged message is redelivered")
    ] = 2_000,
    max_redeliveries: Annotated[int, typer.Option(min=0, help="redeliveries before the tracker dead-letters")] = 3,
    timeout_s: Annotated[
        float, typer.Option("--timeout", min=1.0, help="give up (and report the missing) after this many seconds")
    ] = 120.0,
    bootstrap_servers: Annotated[
        str | None,
        typer.Option(
            "--bootstrap-servers",
            "-b",
            envvar="KMQ_BOOTSTRAP_SERVERS",
            help="a real cluster (default: embedded broker)",
        ),
    ] = None,
    backend: BackendOption = None,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="queue topic (default: a fresh name)")] = None,
    api: Annotated[bool, typer.Option(help="start the REST facade too")] = True,
    api_port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="REST facade port (default: 8080 if free)")
    ] = None,
    keep_running: Annotated[
        bool, typer.Option(help="leave broker, tracker and REST facade up (Ctrl-C stops) and print curl lines")
    ] = False,
    seed: Annotated[int | None, typer.Option(help="random seed of the workers' drops")] = None,
    marker_format: Annotated[
        str, typer.Option("--marker-format", help="kmq (two markers per message) or batch (markers per batch)")
    ] = "batch",
) -> None:
    """Run the whole flow and verify from the topics that no message was lost (exit 0 only then).

    Starts an embedded broker (or uses --bootstrap-servers), the tracker replicas and the REST facade, sends
    numbered messages, runs workers that leave some unacknowledged and reject poison ones, shows live progress,
    then reads the topics back and prints what was processed, duplicated, redelivered, dead-lettered and lost.
    """
    require("kmq demo", "tracker", *(["api"] if api else []))  # it runs them as child processes
    if not bootstrap_servers:
        backend = resolve_backend(backend)
    if keep_running and not api:
        raise fail("--keep-running keeps the REST facade up: it cannot go with --no-api")
    options = DemoOptions(
        messages=messages,
        workers=workers,
        trackers=trackers,
        partitions=partitions,
        drop_rate=drop_rate,
        poison_every=poison_every,
        msg_timeout_ms=msg_timeout_ms,
        max_redeliveries=max_redeliveries,
        deadline_ms=int(timeout_s * 1000),
        bootstrap_servers=bootstrap_servers,
        backend=backend or "kafka",
        queue=queue or "",
        api=api,
        api_port=api_port,
        keep_running=keep_running,
        seed=seed,
        marker_format=marker_format,
    )
    with _signals_interrupt():
        try:
            outcome = run_demo(options, _console)
        except KeyboardInterrupt:
            _console.print("interrupted: every process the demo started is stopped")
            raise
    _console.print(f"total {outcome.total_s:.1f} s (startup {outcome.startup_s:.1f} s, run {outcome.elapsed_s:.1f} s)")
    if not outcome.verdict.ok:
        raise typer.Exit(1)


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP act like Ctrl-C, so the demo stops its children on them too.

    SIGINT is set explicitly: a shell starting `kmq demo` in the background would otherwise leave it ignored.
    """
    previous = {signum: signal.signal(signum, _interrupt) for signum in _STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
