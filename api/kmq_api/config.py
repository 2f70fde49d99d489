"""`ApiConfig`: the one frozen configuration object of the REST facade."""

from __future__ import annotations

from typing import Any, Self

from pydantic import Field, SecretStr, field_validator, model_validator

from kmq.config import KmqConfig
from kmq.settings import FrozenConfig
from kmq_api._env import api_env_names, api_fields_from_env

MIN_SECRET_LENGTH = 32
MAX_WAIT_MS = 20_000


class ApiConfig(FrozenConfig):
    """What the REST facade serves and how.

    `queues` holds one `KmqConfig` per queue served (its markers topic, dead-letter topic and worker group derive
    from the queue's name unless set). With no API key configured the API refuses to start unless
    `allow_anonymous` is set: an open queue is a decision, never an accident.
    """

    queues: tuple[KmqConfig, ...] = Field(min_length=1, description="the queues served, one KmqConfig each")
    receipt_secret: SecretStr = Field(description=f"HMAC key for receipts, at least {MIN_SECRET_LENGTH} characters")
    api_keys: tuple[SecretStr, ...] = Field((), description="bearer tokens accepted")
    admin_keys: tuple[SecretStr, ...] = Field(
        (), description="bearer tokens accepted that may also redrive, move and purge dead letters in the console"
    )
    allow_anonymous: bool = Field(False, description="serve without API keys (only when none is configured)")
    max_body_bytes: int = Field(16 * 1024 * 1024, gt=0, description="largest request body accepted (else 413)")
    max_message_bytes: int = Field(1_000_000, gt=0, description="largest message (value+key+headers) accepted")
    write_timeout_ms: int = Field(
        10_000, gt=0, description="how long a write (or a backlog read) may wait for Kafka before answering 503"
    )
    receiver_idle_ms: int = Field(
        30_000, gt=0, description="leave a queue's worker group after this long without a receive on this replica"
    )
    stall_timeout_ms: int = Field(
        60_000, gt=0, description="/healthz fails when no request finished this long while requests were in progress"
    )
    tracker_urls: tuple[str, ...] = Field(
        (), description="the tracker replicas' HTTP addresses, comma-separated: the console shows their health"
    )
    history_topic: str = Field(
        "kmq-console-history",
        description="compacted topic keeping the console's last hour, so it survives a restart (empty: memory only)",
    )
    # All interfaces by default: the API runs as a service in a pod or container, behind API keys.
    host: str = Field("0.0.0.0", description="interface uvicorn listens on")
    port: int = Field(8080, ge=1, le=65535, description="TCP port uvicorn listens on")

    @field_validator("receipt_secret")
    @classmethod
    def _long_secret(cls, secret: SecretStr) -> SecretStr:
        if len(secret.get_secret_value()) < MIN_SECRET_LENGTH:
            raise ValueError(f"must be at least {MIN_SECRET_LENGTH} characters (e.g. `openssl rand -hex 32`)")
        return secret

    @model_validator(mode="after")
    def _check(self) -> Self:
        names = [queue.queue_topic for queue in self.queues]
        if len(set(names)) != len(names):
            raise ValueError(f"queues must be distinct, got {', '.join(names)}")
        if any(not key.get_secret_value().strip() for key in self.all_keys):
            raise ValueError("api_keys and admin_keys must not contain empty keys")
        if not self.all_keys and not self.allow_anonymous:
            raise ValueError("no API key configured: set KMQ_API_KEYS, or KMQ_API_ALLOW_ANONYMOUS=true to serve openly")
        if self.all_keys and self.allow_anonymous:
            raise ValueError("KMQ_API_KEYS and KMQ_API_ALLOW_ANONYMOUS=true contradict each other: set only one")
        return self

    @property
    def all_keys(self) -> tuple[SecretStr, ...]:
        """Every key accepted: the read-only ones and the admin ones."""
        return (*self.api_keys, *self.admin_keys)

    def queue(self, name: str) -> KmqConfig | None:
        """The configuration of a served queue, or None."""
        return next((queue for queue in self.queues if queue.queue_topic == name), None)

    @classmethod
    def env_names(cls) -> list[str]:
        """The `KMQ_API_*` variables `from_env` reads (besides the shared `KMQ_*` ones)."""
        return api_env_names()

    @classmethod
    def from_env(cls, kmq_overrides: dict[str, Any] | None = None, **overrides: Any) -> ApiConfig:
        """Read `KMQ_API_*` and the shared `KMQ_*` variables (entry points only); `overrides` win, and
        `kmq_overrides` (KmqConfig fields, e.g. `bootstrap_servers`) win for every queue."""
        return cls(**api_fields_from_env(kmq_overrides, **overrides))
