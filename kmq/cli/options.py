"""Options shared by the commands, and building a KmqConfig from them plus `KMQ_*` variables."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kmq.config import KmqConfig

BootstrapOption = Annotated[
    str | None,
    typer.Option("--bootstrap-servers", "-b", help="Kafka bootstrap servers (env KMQ_BOOTSTRAP_SERVERS)"),
]
QueueOption = Annotated[str | None, typer.Option("--queue", "-q", help="queue topic (env KMQ_QUEUE_TOPIC)")]


def build_config(bootstrap_servers: str | None, queue: str | None, **fields: Any) -> KmqConfig:
    """`KMQ_*` variables, overridden by the flags that were given."""
    overrides = {"bootstrap_servers": bootstrap_servers, "queue_topic": queue, **fields}
    return KmqConfig.from_env(**{k: v for k, v in overrides.items() if v is not None})
