"""Producing DataFrame rows to the queue topic from an executor (`df.write.format("kmq")`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kmq.config import KmqConfig
from kmq.errors import ConfigError
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.spark.values import headers, to_bytes


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
    return OutgoingMessage(to_bytes(fields["value"]), to_bytes(fields.get("key")), headers(fields.get("headers")),
                           fields.get("partition"))  # fmt: skip
