"""Options shared by the commands, and building a KmqConfig from them plus `KMQ_*` variables."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kmq.cli.errors import fail
from kmq.config import KmqConfig
from kmq.embedded import BACKENDS, default_backend
from kmq.errors import ConfigError
from kmq.settings import ENV_PREFIX, env_name

if TYPE_CHECKING:
    from pydantic import BaseModel

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


def settings_epilog(own: list[str] | tuple[str, ...]) -> str:
    """A command's help ending: its own variables (generated from its config class, so the help never falls behind
    it), and where the shared ones are described."""
    shared = "The shared KMQ_* settings, and what each variable means: docs/reference/configuration.md."
    return f"Its own settings: {', '.join(own)}. {shared}"


def build_config(bootstrap_servers: str | None, queue: str | None, **fields: Any) -> KmqConfig:
    """`KMQ_*` variables, overridden by the flags that were given; a bad or missing setting names its variable."""
    overrides = {"bootstrap_servers": bootstrap_servers, "queue_topic": queue, **fields}
    try:
        return KmqConfig.from_env(**{k: v for k, v in overrides.items() if v is not None})
    except ConfigError as e:
        raise with_env_hint(e, env_hint(e.field)) from e


def env_hint(field: str, own: type[BaseModel] | None = None, own_prefix: str = "") -> str | None:
    """The environment variable behind a config field (of KmqConfig, `kmq.`-prefixed when nested, or of `own`,
    whose variables are `KMQ_` + `own_prefix` + field), for an error message; None when the error names one."""
    name = field.removeprefix("kmq.")
    if field.startswith(ENV_PREFIX):
        return None
    if name != field or name in KmqConfig.model_fields:
        return env_name(name)
    if own is not None and name in own.model_fields:
        return env_name(own_prefix + name)
    return None


def with_env_hint(error: ConfigError, hint: str | None) -> ConfigError:
    """`error`, telling the user which variable (or flag) to set."""
    if hint is None:
        return error
    return ConfigError(error.field, f"{str(error).removeprefix(f'{error.field}: ')} (set {hint} or its flag)")
