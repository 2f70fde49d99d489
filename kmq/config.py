"""`KmqConfig`: the one frozen configuration object of the client library."""

from __future__ import annotations

import re
from typing import Any, Literal, Self

from pydantic import Field, SecretStr, model_validator

from kmq.settings import FrozenConfig, read_env, read_secret_file, to_env

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
# librdkafka settings that kmq owns: they come from KmqConfig's own fields, never from the pass-through.
_RESERVED_KAFKA_KEYS = frozenset(
    {"bootstrap.servers", "group.id", "enable.auto.commit", "enable.auto.offset.store", "transactional.id"}
)
KafkaValue = str | int | float | bool


class KmqConfig(FrozenConfig):
    """Settings shared by the client, the producer, the tracker and the REST facade.

    Topic and group names left empty derive from `queue_topic` (PROTOCOL.md's defaults).
    `kafka_config` passes librdkafka settings (SASL/TLS, tuning) to every Kafka client;
    `consumer_kafka_config` to consumers only.
    """

    bootstrap_servers: str = Field(description="Kafka bootstrap servers, host:port[,host:port]")
    queue_topic: str = Field(description="the queue topic Q")
    markers_topic: str = Field("", description="markers topic M (default: Q__markers)")
    dead_letter_topic: str = Field("", description="dead-letter topic D (default: Q__undelivered)")
    group_id: str = Field("", description="consumer group of the workers (default: Q__workers)")
    msg_timeout_ms: int = Field(30_000, gt=0, description="time a worker has before a message is redelivered")
    max_redeliveries: int = Field(3, ge=0, description="redeliveries before a message is dead-lettered")
    nack_backoff_base_ms: int = Field(1_000, ge=0, description="nack delay after the first delivery")
    nack_backoff_max_ms: int = Field(60_000, ge=0, description="upper bound of the nack backoff")
    metadata_timeout_ms: int = Field(
        15_000, gt=0, description="how long start-up checks wait for the cluster before reporting it unreachable"
    )
    kafka_unavailable_after_ms: int = Field(
        60_000,
        gt=0,
        description="a client no broker has answered this long, while the bootstrap servers accept connections, is"
        " declared unavailable (receive raises, /healthz fails)",
    )
    transactional: bool = Field(False, description="write START markers and commit offsets in one transaction")
    pipelined: bool = Field(
        True,
        description="hand a batch over without waiting for its STARTs, and commit its offsets asynchronously once they"
        " are acknowledged (false: wait for the STARTs and the commit in receive()); not in transactional mode",
    )
    marker_format: Literal["kmq", "batch"] = Field(
        "batch",
        description="`kmq`: two markers per message (JVM kmq compatible); `batch`: per batch (this project's tracker)",
    )
    end_flush_ms: int = Field(
        100, gt=0, description="with `batch` markers: the longest an acknowledgement waits before it is written"
    )
    redelivery_tracker: Literal["kmq", "jvm"] = Field(
        "kmq",
        description="the tracker that redelivers: `kmq` (this project's) or `jvm` (SoftwareMill's JVM kmq: the client"
        " then refuses extend and warns of nack delays past msg_timeout_ms; see the docs' JVM kmq compatibility page)",
    )
    security_protocol: str = Field("", description="librdkafka security.protocol (e.g. SASL_SSL)")
    sasl_mechanism: str = Field("", description="librdkafka sasl.mechanism (e.g. SCRAM-SHA-512)")
    sasl_username: str = Field("", description="SASL user name")
    sasl_password: SecretStr = Field(SecretStr(""), description="SASL password")
    sasl_password_file: str = Field(
        "", description="file holding the SASL password (a mounted Secret), read at each client's start"
    )
    ssl_ca_location: str = Field("", description="CA certificate file for TLS")
    kafka_config: dict[str, KafkaValue] = Field(
        default_factory=dict, description="librdkafka settings for every client (a JSON object in the environment)"
    )
    consumer_kafka_config: dict[str, KafkaValue] = Field(
        default_factory=dict, description="librdkafka settings for consumers only (a JSON object)"
    )

    @model_validator(mode="before")
    @classmethod
    def _derive_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("queue_topic"):
            queue = data["queue_topic"]
            data = dict(data)
            data["markers_topic"] = data.get("markers_topic") or f"{queue}__markers"
            data["dead_letter_topic"] = data.get("dead_letter_topic") or f"{queue}__undelivered"
            data["group_id"] = data.get("group_id") or f"{queue}__workers"
        if isinstance(data, dict) and data.get("redelivery_tracker") == "jvm" and not data.get("marker_format"):
            # The default format is batch, which a JVM tracker cannot read: declaring one picks kmq's markers.
            data = {**data, "marker_format": "kmq"}
        return data

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.bootstrap_servers.strip():
            raise ValueError("bootstrap_servers must not be empty (e.g. localhost:9092)")
        for field in ("queue_topic", "markers_topic", "dead_letter_topic"):
            if not _TOPIC_NAME.match(getattr(self, field)):
                raise ValueError(f"{field} must be 1-249 characters of a-z A-Z 0-9 . _ -")
        if len({self.queue_topic, self.markers_topic, self.dead_letter_topic}) != 3:
            raise ValueError("queue_topic, markers_topic and dead_letter_topic must be three different topics")
        if self.sasl_password_file and self.sasl_password.get_secret_value():
            raise ValueError("sasl_password_file and sasl_password are both set: keep one")
        # A JVM kmq tracker reads any marker type but START as an END: batch markers would never be redelivered.
        if self.redelivery_tracker == "jvm" and self.marker_format != "kmq":
            raise ValueError(
                "redelivery_tracker 'jvm' needs marker_format 'kmq': a JVM kmq tracker reads a BATCH START as an END"
                " and would never redeliver those messages"
            )
        if self.nack_backoff_max_ms < self.nack_backoff_base_ms:
            raise ValueError("nack_backoff_max_ms must be at least nack_backoff_base_ms")
        for field in ("kafka_config", "consumer_kafka_config"):
            reserved = sorted(_RESERVED_KAFKA_KEYS & getattr(self, field).keys())
            if reserved:
                raise ValueError(f"{field} must not set {', '.join(reserved)}: kmq sets them from its own fields")
            if "sasl.password" in getattr(self, field):
                raise ValueError(f"{field} must not hold sasl.password: set sasl_password or sasl_password_file")
        return self

    @classmethod
    def from_env(cls, **overrides: Any) -> KmqConfig:
        """Read `KMQ_*` environment variables (e.g. `KMQ_BOOTSTRAP_SERVERS`); `overrides` win."""
        return cls(**{**read_env(cls), **overrides})

    def to_env(self) -> dict[str, str]:
        """Every `KMQ_*` variable of this config: `from_env` in a child process reads it back exactly."""
        return to_env(self)

    def with_overrides(self, **changes: Any) -> KmqConfig:
        """A copy with some fields changed, validated like a new config."""
        data = self.model_dump()
        data["sasl_password"] = self.sasl_password
        return KmqConfig(**{**data, **changes})

    def kafka_settings(self) -> dict[str, KafkaValue]:
        """librdkafka settings common to every client: servers, security, then the pass-through."""
        settings: dict[str, KafkaValue] = {"bootstrap.servers": self.bootstrap_servers}
        named = {
            "security.protocol": self.security_protocol,
            "sasl.mechanism": self.sasl_mechanism,
            "sasl.username": self.sasl_username,
            "sasl.password": self._sasl_password(),
            "ssl.ca.location": self.ssl_ca_location,
        }
        settings.update({k: v for k, v in named.items() if v})
        settings.update(self.kafka_config)
        return settings

    def _sasl_password(self) -> str:
        # Read when a client is made (each component makes its first at start), not when the config is: a rotated
        # Secret reaches the next client, and a config can be checked where the Secret is not mounted.
        if self.sasl_password_file:
            return read_secret_file(self.sasl_password_file, "sasl_password_file")
        return self.sasl_password.get_secret_value()

    def nack_delay_ms(self, redelivery_count: int) -> int:
        """Exponential backoff: base * 2^count, capped at the maximum."""
        return min(self.nack_backoff_max_ms, self.nack_backoff_base_ms << min(redelivery_count, 32))
