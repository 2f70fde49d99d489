"""Reading `KMQ_*` environment variables into config objects (entry points only)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from kmq.errors import ConfigError

ENV_PREFIX = "KMQ_"


def env_name(field: str) -> str:
    return f"{ENV_PREFIX}{field.upper()}"


def env_names(model: type[BaseModel]) -> list[str]:
    """Every `KMQ_*` variable a config class reads."""
    return [env_name(name) for name in model.model_fields]


def read_env(model: type[BaseModel]) -> dict[str, Any]:
    """The fields of `model` that are set in the environment, parsed (dicts as JSON); unset ones are left out."""
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
