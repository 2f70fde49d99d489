"""The options of the `kmq` Spark data sources, read into a frozen `SourceOptions`: a `KmqConfig` and Spark knobs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kmq.config import KafkaValue, KmqConfig
from kmq.errors import ConfigError

MARKER_FORMATS = ("kmq", "batch")  # PROTOCOL.md: two markers per row, or a BATCH START/END per task and partition
_KAFKA_PREFIX = "kafka."
_KNOWN = frozenset(
    {"bootstrap.servers", "queue", "group", "markers", "dead_letters", "msg_timeout_ms", "marker_format",
     "max_records_per_batch", "max_rows_per_task", "chunk_size", "path", "topic", "checkpointlocation",
     "sasl_password_file"}
)  # fmt: skip  # Spark passes "path" and "checkpointLocation" to sources and sinks itself


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What a reader or writer needs on the driver and on every executor (picklable)."""

    config: KmqConfig  # its marker_format: the STARTs the source writes and the ENDs the ack sink writes
    max_records_per_batch: int = 0  # 0: no admission limit
    max_rows_per_task: int = 100_000  # a partition's range is cut into tasks of at most this many, read in parallel
    chunk_size: int = 5_000  # rows per START flush on an executor

    @staticmethod
    def parse(options: Mapping[str, str]) -> SourceOptions:
        """Options as Spark passes them (strings, case-insensitive keys); ConfigError names a bad one."""
        given = {key.lower(): value for key, value in options.items()}
        unknown = sorted(k for k in given if k not in _KNOWN and not k.startswith(_KAFKA_PREFIX))
        if unknown:
            raise ConfigError(unknown[0], f"unknown option; known: {', '.join(sorted(_KNOWN))}, kafka.*")
        for required in ("bootstrap.servers", "queue"):
            if not given.get(required):
                raise ConfigError(required, "option is required, e.g. .option('queue', 'orders')")
        marker_format = given.get("marker_format")
        if marker_format is not None and marker_format not in MARKER_FORMATS:
            raise ConfigError("marker_format", f"{marker_format!r} is not one of {', '.join(MARKER_FORMATS)}")
        return SourceOptions(
            config=_config(given),
            max_records_per_batch=_int(given, "max_records_per_batch", 0, minimum=0),
            max_rows_per_task=_int(given, "max_rows_per_task", 100_000, minimum=1),
            chunk_size=_int(given, "chunk_size", 5_000, minimum=1),
        )


def _config(given: Mapping[str, str]) -> KmqConfig:
    kafka: dict[str, KafkaValue] = {k[len(_KAFKA_PREFIX) :]: v for k, v in given.items() if k.startswith(_KAFKA_PREFIX)}
    fields: dict[str, object] = {
        "bootstrap_servers": given["bootstrap.servers"],
        "queue_topic": given["queue"],
        "markers_topic": given.get("markers", ""),
        "dead_letter_topic": given.get("dead_letters", ""),
        "group_id": given.get("group", ""),
        "kafka_config": kafka,
    }
    # KmqConfig keeps the password out of kafka_config (it would show in reprs): kafka.sasl.password is its field.
    if "sasl.password" in kafka:
        fields["sasl_password"] = str(kafka.pop("sasl.password"))
    if "sasl_password_file" in given:
        fields["sasl_password_file"] = given["sasl_password_file"]
    if "marker_format" in given:  # else KmqConfig's default, as every other kmq client
        fields["marker_format"] = given["marker_format"]
    if "msg_timeout_ms" in given:
        fields["msg_timeout_ms"] = _int(given, "msg_timeout_ms", 0, minimum=1)
    try:
        return KmqConfig(**fields)
    except ValueError as e:
        raise ConfigError("options", str(e)) from e


def _int(given: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = given.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError as e:
        raise ConfigError(name, f"must be an integer, got {raw!r}") from e
    if value < minimum:
        raise ConfigError(name, f"must be at least {minimum}, got {value}")
    return value
