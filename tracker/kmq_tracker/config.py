"""`TrackerConfig`: the tracker's one frozen configuration object, a `KmqConfig` plus the service's own fields."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, Field, create_model, model_validator

from kmq.config import KmqConfig
from kmq.settings import FrozenConfig, env_names, read_env, to_env

ENV_FIELD_PREFIX = "tracker_"  # tracker fields read from KMQ_TRACKER_<FIELD>
DEFAULT_HTTP_PORT = 9095  # clear of Prometheus (9090), Pushgateway (9091) and node-exporter (9100)


class TrackerConfig(FrozenConfig):
    """Settings of one tracker replica.

    `group_id` left empty derives from the markers topic (PROTOCOL.md: `M + "__tracker"`).
    `http_port=0` binds an ephemeral port (tests); the bound port is on the running service.
    """

    kmq: KmqConfig
    group_id: str = Field("", description="consumer group of the tracker replicas (default: M__tracker)")
    http_host: str = Field("0.0.0.0", description="address of the /metrics, /healthz and /readyz server")
    http_port: int = Field(DEFAULT_HTTP_PORT, ge=0, le=65535, description="port of that server; 0 picks a free one")
    http_enabled: bool = Field(True, description="serve /metrics, /healthz and /readyz")
    redelivery_rate_per_s: float = Field(1000.0, gt=0, description="redeliveries per second, all partitions")
    max_in_flight: int = Field(500, ge=1, description="redeliveries produced before waiting for their acks, per pass")
    redelivery_workers: int = Field(
        4, ge=1, le=64, description="partitions redelivered at once (a slow partition holds up only its own worker)"
    )
    commit_interval_ms: int = Field(1000, gt=0, description="how often the pending tail of each partition is committed")
    max_wait_ms: int = Field(100, gt=0, le=1000, description="longest wait for markers between deadline checks")
    retry_backoff_ms: int = Field(200, gt=0, description="first wait after a failed redelivery")
    retry_backoff_max_ms: int = Field(10_000, gt=0, description="longest wait between redelivery retries")
    write_timeout_ms: int = Field(30_000, gt=0, description="how long a copy or END may take to be acknowledged")
    read_timeout_ms: int = Field(10_000, gt=0, description="how long reading a due message from the queue may take")
    liveness_timeout_ms: int = Field(60_000, gt=0, description="/healthz fails when the loop has not turned this long")
    clock_offset_ms: int = Field(
        0,
        description="tests only: shift this tracker's wall clock by this much (a host clock that is off), to show"
        " that redeliveries follow the broker's clock",
    )
    stall_timeout_ms: int = Field(
        60_000,
        gt=0,
        description="/healthz fails when no redelivery pass ended (nor, with none running, markers were read) this long"
        " while messages were overdue or a pass ran",
    )
    shutdown_timeout_ms: int = Field(
        80_000,
        gt=0,
        description="longest a stop may take (passes, flushes, commit, leaving the group); then it gives up and exits 1"
        " (keep it below terminationGracePeriodSeconds, 90 s in deploy/kubernetes)",
    )
    topic_check_interval_ms: int = Field(
        30_000, gt=0, description="how often queue and markers partition counts are compared (added partitions)"
    )

    @model_validator(mode="before")
    @classmethod
    def _derive_group(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("group_id"):
            kmq = data.get("kmq")
            kmq = KmqConfig(**kmq) if isinstance(kmq, dict) else kmq
            if isinstance(kmq, KmqConfig):
                data = {**data, "kmq": kmq, "group_id": f"{kmq.markers_topic}__tracker"}
        return data

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ValueError("retry_backoff_max_ms must be at least retry_backoff_ms")
        if self.group_id == self.kmq.group_id:
            raise ValueError("group_id must differ from the workers' group (kmq.group_id)")
        return self

    @property
    def isolation_level(self) -> Literal["read_committed", "read_uncommitted"]:
        """read_committed in transactional mode: a START then exists if and only if its offset was committed."""
        return "read_committed" if self.kmq.transactional else "read_uncommitted"

    @classmethod
    def from_env(cls, kmq_overrides: dict[str, Any] | None = None, **overrides: Any) -> TrackerConfig:
        """`KMQ_*` for the core settings, `KMQ_TRACKER_*` for the tracker's own; the overrides (flags) win."""
        kmq = KmqConfig.from_env(**(kmq_overrides or {}))
        prefixed = read_env(_env_model())
        tracker_env = {name.removeprefix(ENV_FIELD_PREFIX): value for name, value in prefixed.items()}
        return cls(kmq=kmq, **{**tracker_env, **overrides})

    def to_env(self) -> dict[str, str]:
        """Every `KMQ_*` and `KMQ_TRACKER_*` variable of this config: `from_env` in a child reads it back exactly."""
        return {**self.kmq.to_env(), **to_env(self, ENV_FIELD_PREFIX)}

    @classmethod
    def env_names(cls) -> list[str]:
        """The `KMQ_TRACKER_*` variables this config reads (the core `KMQ_*` ones come from `KmqConfig`)."""
        return env_names(_env_model())


def _env_model() -> type[BaseModel]:
    """A model whose field names carry the `tracker_` prefix, so `read_env` maps them to `KMQ_TRACKER_*`."""
    fields: dict[str, Any] = {
        f"{ENV_FIELD_PREFIX}{name}": (info.annotation, None)
        for name, info in TrackerConfig.model_fields.items()
        if name != "kmq"
    }
    return create_model("TrackerEnv", **fields)
