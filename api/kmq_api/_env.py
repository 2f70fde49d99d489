"""Reading the REST facade's configuration from `KMQ_*` environment variables (entry points only)."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from kmq.config import KmqConfig
from kmq.errors import ConfigError
from kmq.settings import env_name, env_names, read_env

# Per-queue names: with several queues each one's topics and group derive from its own name.
_PER_QUEUE = ("markers_topic", "dead_letter_topic", "group_id")


class _ApiEnv(BaseModel):
    """The `KMQ_API_*` variables (the field name, upper-cased and prefixed with `KMQ_`, is the variable)."""

    api_queues: str = ""
    api_keys: str = ""
    api_admin_keys: str = ""
    api_allow_anonymous: bool = False
    api_receipt_secret: str = ""
    api_max_body_bytes: int = 0
    api_max_message_bytes: int = 0
    api_write_timeout_ms: int = 0
    api_receiver_idle_ms: int = 0
    api_stall_timeout_ms: int = 0
    api_history_topic: str = ""
    api_tracker_urls: str = ""
    api_host: str = ""
    api_port: int = 0


def api_env_names() -> list[str]:
    return env_names(_ApiEnv)


def api_fields_from_env(kmq_overrides: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    """The `ApiConfig` fields the environment sets; `overrides` (ApiConfig fields) and `kmq_overrides` (KmqConfig
    fields of every queue, e.g. the `--bootstrap-servers` flag) win. `ApiConfig.from_env` validates them."""
    env = read_env(_ApiEnv)
    fields: dict[str, Any] = {
        "queues": _queue_configs(env.get("api_queues", ""), kmq_overrides or {}),
        "api_keys": tuple(_split(env.get("api_keys", ""))),
        "admin_keys": tuple(_split(env.get("api_admin_keys", ""))),
        "tracker_urls": tuple(_split(env.get("api_tracker_urls", ""))),
        "receipt_secret": env.get("api_receipt_secret", ""),
    }
    optional = (
        "allow_anonymous",
        "max_body_bytes",
        "max_message_bytes",
        "write_timeout_ms",
        "receiver_idle_ms",
        "stall_timeout_ms",
    )
    for name in (*optional, "host", "port"):
        if env.get(f"api_{name}") not in (None, "", 0):
            fields[name] = env[f"api_{name}"]
    if env.get("api_history_topic") is not None:
        fields["history_topic"] = env["api_history_topic"]  # "" is a choice: memory only
    if not fields["receipt_secret"] and "receipt_secret" not in overrides:
        raise ConfigError(env_name("api_receipt_secret"), "is required (e.g. `openssl rand -hex 32`)")
    return {**fields, **overrides}


def _queue_configs(queues: str, kmq_overrides: dict[str, Any]) -> tuple[KmqConfig, ...]:
    names = _split(queues) or _split(os.environ.get(env_name("queue_topic"), ""))
    if not names:
        raise ConfigError(env_name("api_queues"), "name at least one queue (comma-separated)")
    if len(names) > 1:
        for field in _PER_QUEUE:
            if os.environ.get(env_name(field)):
                raise ConfigError(env_name(field), "cannot apply to several queues; unset it (names derive per queue)")
    return tuple(_one_queue(name, len(names) == 1, kmq_overrides) for name in names)


def _one_queue(name: str, single: bool, kmq_overrides: dict[str, Any]) -> KmqConfig:
    if single:
        return KmqConfig.from_env(**kmq_overrides, queue_topic=name)
    return KmqConfig.from_env(**kmq_overrides, queue_topic=name, **dict.fromkeys(_PER_QUEUE, ""))


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
