"""`kmq broker`: an embedded Kafka broker in the foreground, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import json
import shlex
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Annotated

import typer

from kmq.cli.errors import fail, friendly_errors
from kmq.cli.options import BackendOption, resolve_backend
from kmq.embedded import EmbeddedKafka
from kmq.errors import ConfigError

_HEALTH_CHECK_S = 0.5
USAGE_ERROR = 2


@friendly_errors
def broker(
    backend: BackendOption = None,
    port: Annotated[int | None, typer.Option(help="port on 127.0.0.1 (kafka, tansu; default: a free one)")] = None,
    prepare_only: Annotated[
        bool, typer.Option(help="only fetch what the backend needs (Apache Kafka's jars, cached), then exit")
    ] = False,
) -> None:
    """Run an embedded Kafka broker until Ctrl-C; prints the `export` lines that point kmq at it."""
    try:
        backend = resolve_backend(backend)
    except ConfigError as e:
        raise fail(str(e), USAGE_ERROR) from e
    if prepare_only:
        embedded = EmbeddedKafka(backend, port)
        embedded.prepare()
        typer.echo(f"the embedded {embedded.describe()} broker is ready to start")
        return
    with _stop_requests() as stop_requested, EmbeddedKafka(backend, port) as kafka:
        for line in _announcement(kafka):
            typer.echo(line)
        while not stop_requested.wait(_HEALTH_CHECK_S):
            if not kafka.running():
                raise fail(f"the {backend} broker exited unexpectedly; its last output:\n{kafka.output_tail()}")
    typer.echo("broker stopped")


def register(app: typer.Typer) -> None:
    app.command("broker")(broker)


def _announcement(kafka: EmbeddedKafka) -> Iterator[str]:
    yield f"embedded {kafka.describe()} broker (pid {kafka.pid}) listening on {kafka.bootstrap_servers}"
    if kafka.log_file:
        yield f"its log: {kafka.log_file}"
    yield f"export KMQ_BOOTSTRAP_SERVERS={kafka.bootstrap_servers}"
    for name, settings in (
        ("KMQ_KAFKA_CONFIG", kafka.kafka_config),
        ("KMQ_CONSUMER_KAFKA_CONFIG", kafka.consumer_kafka_config),
    ):
        if settings:
            yield f"export {name}={shlex.quote(json.dumps(settings, separators=(',', ':')))}"
    yield "press Ctrl-C to stop"


@contextmanager
def _stop_requests() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM (instead of KeyboardInterrupt mid-startup), handlers restored on exit."""
    requested = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        requested.set()

    previous = {signum: signal.signal(signum, request_stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield requested
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
