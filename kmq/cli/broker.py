"""`kmq broker`: an embedded Kafka broker in the foreground, until Ctrl-C or SIGTERM.

One broker ends the command when it dies; a cluster (`--nodes 3`) reports a dead node and serves on while a quorum
of its nodes runs (`kmq.cli.broker_nodes`)."""

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

from kmq.cli.broker_nodes import watch_cluster
from kmq.cli.errors import fail, friendly_errors
from kmq.cli.options import BackendOption, resolve_backend
from kmq.embedded import EmbeddedKafka
from kmq.errors import ConfigError

_HEALTH_CHECK_S = 0.5
USAGE_ERROR = 2


@friendly_errors
def broker(
    backend: BackendOption = None,
    port: Annotated[int | None, typer.Option(help="port (kafka, tansu; default: a free one)")] = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="the address to listen on and advertise (kafka backend; default 127.0.0.1), e.g. 10.233.0.1 for "
            "the pods of scripts/k8s-up"
        ),
    ] = None,
    prepare_only: Annotated[
        bool, typer.Option(help="only fetch what the backend needs (Apache Kafka's jars, cached), then exit")
    ] = False,
    nodes: Annotated[
        int, typer.Option(min=1, help="KRaft nodes (kafka backend): 3 gives replication factor 3, min ISR 2")
    ] = 1,
    restart_dead_after: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="SECONDS",
            help="with --nodes > 1: start a node that died again this long after (on its data and ports)",
        ),
    ] = None,
) -> None:
    """Run an embedded Kafka broker until Ctrl-C; prints the `export` lines that point kmq at it."""
    try:
        backend = resolve_backend(backend)
    except ConfigError as e:
        raise fail(str(e), USAGE_ERROR) from e
    if nodes != 1 and backend != "kafka":
        raise fail(f"--nodes needs --backend kafka; {backend} runs one broker", USAGE_ERROR)
    if host is not None and backend != "kafka":
        raise fail(f"--host needs --backend kafka; {backend} listens on 127.0.0.1 only", USAGE_ERROR)
    if restart_dead_after is not None and nodes == 1:
        raise fail("--restart-dead-after needs --nodes 3 (or more): one broker that dies ends the command", USAGE_ERROR)
    if prepare_only:
        embedded = EmbeddedKafka(backend, port)
        embedded.prepare()
        typer.echo(f"the embedded {embedded.describe()} broker is ready to start")
        return
    with _stop_requests() as stop_requested, EmbeddedKafka(backend, port, nodes=nodes, host=host) as kafka:
        for line in _announcement(kafka, restart_dead_after):
            typer.echo(line)
        if nodes > 1:  # serves on while a quorum of nodes runs (QuorumLost: an error once fewer are left)
            restart_after_ms = None if restart_dead_after is None else restart_dead_after * 1000
            watch_cluster(kafka, stop_requested, _HEALTH_CHECK_S, restart_after_ms)
        while not stop_requested.wait(_HEALTH_CHECK_S):
            if not kafka.running():
                raise fail(f"the {backend} broker exited unexpectedly; its last output:\n{kafka.output_tail()}")
    typer.echo("broker stopped")


def register(app: typer.Typer) -> None:
    app.command("broker")(broker)


def _announcement(kafka: EmbeddedKafka, restart_dead_after: int | None) -> Iterator[str]:
    yield f"embedded {kafka.describe()} broker (pid {kafka.pid}) listening on {kafka.bootstrap_servers}"
    if kafka.node_count > 1:
        nodes = kafka.nodes
        yield "nodes: " + ", ".join(f"{i} at {nodes.address(i)} (pid {nodes.pid(i)})" for i in nodes.ids)
        quorum = kafka.node_count // 2 + 1
        again = "not restarted" if restart_dead_after is None else f"started again after {restart_dead_after} s"
        yield f"serves while {quorum} of {kafka.node_count} nodes run; a dead node is {again}"
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
