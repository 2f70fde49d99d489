"""Producing DataFrame rows to the queue topic from an executor (`df.write.format("kmq")`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kmq.config import KmqConfig
from kmq.errors import ConfigError
from kmq.headers import Headers
from kmq.producer import KmqProducer, OutgoingMessage


def send_rows(config: KmqConfig, rows: Iterable[Any], timeout_s: float = 60.0) -> int:
    """Send every row and wait until all are acknowledged; the number sent. DeliveryError fails the task."""
    sent = 0
    with KmqProducer(config, check=False) as producer:
        for row in rows:
            message = to_message(row.asDict())
            producer.send(message.value, message.key, message.headers, message.partition)
            sent += 1
        producer.flush(timeout_s)
    return sent


def to_message(fields: dict[str, Any]) -> OutgoingMessage:
    if "value" not in fields:
        raise ConfigError("value", "df.write.format('kmq') needs a binary or string column named value")
    return OutgoingMessage(_bytes(fields["value"]), _bytes(fields.get("key")), headers(fields.get("headers")),
                           fields.get("partition"))  # fmt: skip


def headers(raw: Any) -> Headers:
    """Spark's array<struct<key, value>> as kmq headers."""
    return [(str(pair["key"]), _bytes(pair["value"])) for pair in raw or ()]


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return str(value).encode()
