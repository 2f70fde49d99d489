"""Config objects and `KMQ_*` environment variables: the frozen base of every component's config, reading the
environment into one (entry points only) and writing one back out for a child process."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from kmq.errors import ConfigError

ENV_PREFIX = "KMQ_"


class FrozenConfig(BaseModel):
    """Base of the components' configs: frozen, unknown fields refused, a bad value a ConfigError naming it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise config_error(e, type(self).model_fields) from e


def config_error(error: ValidationError, fields: Iterable[str]) -> ConfigError:
    """The first validation problem as a ConfigError under the field's name.

    A model-level check has no location but starts its message with the field it is about ("x must ...")."""
    first = error.errors()[0]
    message = first["msg"].removeprefix("Value error, ")
    named = message.replace(",", " ").split(" ", 1)[0]
    field = ".".join(str(part) for part in first["loc"]) or (named if named in set(fields) else "config")
    return ConfigError(field, message)


def env_name(field: str) -> str:
    return f"{ENV_PREFIX}{field.upper()}"


def env_names(model: type[BaseModel]) -> list[str]:
    """Every `KMQ_*` variable a config class reads."""
    return [env_name(name) for name in model.model_fields]


def read_env(model: type[BaseModel]) -> dict[str, Any]:
    """The fields of `model` that are set in the environment, parsed (dicts as JSON); unset ones are left out."""
    # Imported here, at the entry points that read the environment: every process that only builds a config from
    # values (a Python worker Spark spawns, a child process) is spared pydantic-settings' ~20-30 ms of imports.
    from pydantic_settings import BaseSettings, SettingsConfigDict

    annotations = {name: info.annotation | None for name, info in model.model_fields.items()}  # type: ignore[operator]  # annotations are types
    settings_cls = type(
        f"_{model.__name__}Env",
        (BaseSettings,),
        {
            "__annotations__": annotations,
            **dict.fromkeys(annotations),
            "model_config": SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore"),
        },
    )
    try:
        values = settings_cls().model_dump()
    except ValidationError as e:
        first = e.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "?"
        raise ConfigError(env_name(name), first["msg"]) from e
    return {k: v for k, v in values.items() if v is not None}


def env_value(value: object) -> str:
    """A field's value as its environment variable spells it (`read_env` reads it back)."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, dict) else str(value)


def to_env(config: BaseModel, field_prefix: str = "") -> dict[str, str]:
    """The `KMQ_*` variables of a config's own (non-nested) fields, so a child process reads exactly this config."""
    values = {name: getattr(config, name) for name in type(config).model_fields}
    return {env_name(field_prefix + k): env_value(v) for k, v in values.items() if not isinstance(v, BaseModel)}


def read_secret_file(path: str, field: str) -> str:
    """A secret from a file (a mounted Kubernetes Secret: the value, maybe with a trailing newline); ConfigError
    naming the setting and the file, never its content."""
    try:
        return Path(path).read_text().rstrip("\r\n")
    except OSError as e:
        raise ConfigError(field, f"cannot read {path}: {e.strerror or e} (is the Secret mounted there?)") from e
