"""Options shared by the commands, and building a KmqConfig from them plus `KMQ_*` variables."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer

from kmq.cli.errors import fail
from kmq.config import KmqConfig
from kmq.embedded import BACKENDS, default_backend
from kmq.errors import ConfigError

BootstrapOption = Annotated[
    str | None,
    typer.Option("--bootstrap-servers", "-b", help="Kafka bootstrap servers (env KMQ_BOOTSTRAP_SERVERS)"),
]
QueueOption = Annotated[str | None, typer.Option("--queue", "-q", help="queue topic (env KMQ_QUEUE_TOPIC)")]
BackendOption = Annotated[
    str | None,
    typer.Option(
        help="embedded broker: kafka (Apache Kafka; needs Java 17+ and mvn), tansu or mock "
        "(default: kafka where Java 17+ and mvn are installed, else tansu)"
    ),
]


def resolve_backend(backend: str | None) -> str:
    """The `--backend` given (checked), else the default for this machine, saying why when it is not kafka."""
    if backend is None:
        backend = default_backend()
        if backend != "kafka":
            typer.echo("Java 17+ or mvn not found: using the embedded tansu broker (in memory)", err=True)
        return backend
    if backend not in BACKENDS:
        raise ConfigError("--backend", f"{backend!r} is not a backend: choose {', '.join(BACKENDS)}")
    return backend


def parse_log_level(level: str) -> int:
    """The numeric level for `--log-level`, or a one-line error naming the flag."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise fail(f"--log-level: unknown level {level!r} (use debug, info, warning or error)")
    return numeric


def build_config(bootstrap_servers: str | None, queue: str | None, **fields: Any) -> KmqConfig:
    """`KMQ_*` variables, overridden by the flags that were given."""
    overrides = {"bootstrap_servers": bootstrap_servers, "queue_topic": queue, **fields}
    return KmqConfig.from_env(**{k: v for k, v in overrides.items() if v is not None})
