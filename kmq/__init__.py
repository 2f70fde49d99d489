"""kmq: individual message acknowledgement and redelivery for Kafka work queues.

The public names are imported on first use (PEP 562), not with the package: a process that needs one module of
kmq — a Python worker Spark spawns for `kmq.spark`, a CLI command — does not pay for the client, the worker and
their dependencies."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kmq.admin import check_topics, ensure_topics
    from kmq.client import KmqClient
    from kmq.config import KmqConfig
    from kmq.errors import (
        BrokerUnavailableError,
        ClientClosedError,
        CommitError,
        ConfigError,
        DeliveryError,
        DurationTooLongError,
        EmbeddedBrokerError,
        KafkaUnavailableError,
        KmqError,
        MarkerDecodeError,
        MarkerWriteError,
        TopicMismatchError,
        TopicMissingError,
        TransactionError,
    )
    from kmq.marker_writer import MarkerWriter
    from kmq.markers import EndMarker, Marker, MarkerKey, StartMarker, decode_marker
    from kmq.message import Message
    from kmq.producer import KmqProducer, OutgoingMessage, SendResult
    from kmq.worker import Ordering, Reject, Retry, Worker, WorkerConfig

_ERRORS = (
    "BrokerUnavailableError ClientClosedError CommitError ConfigError DeliveryError DurationTooLongError "
    "EmbeddedBrokerError KafkaUnavailableError KmqError MarkerDecodeError MarkerWriteError TopicMismatchError "
    "TopicMissingError TransactionError"
)
_MODULES = {  # public name -> the module that defines it
    **dict.fromkeys(("check_topics", "ensure_topics"), "kmq.admin"),
    "KmqClient": "kmq.client",
    "KmqConfig": "kmq.config",
    **dict.fromkeys(_ERRORS.split(), "kmq.errors"),
    "MarkerWriter": "kmq.marker_writer",
    **dict.fromkeys(("EndMarker", "Marker", "MarkerKey", "StartMarker", "decode_marker"), "kmq.markers"),
    "Message": "kmq.message",
    **dict.fromkeys(("KmqProducer", "OutgoingMessage", "SendResult"), "kmq.producer"),
    **dict.fromkeys(("Ordering", "Reject", "Retry", "Worker", "WorkerConfig"), "kmq.worker"),
}

__all__ = [
    "BrokerUnavailableError",
    "ClientClosedError",
    "CommitError",
    "ConfigError",
    "DeliveryError",
    "DurationTooLongError",
    "EmbeddedBrokerError",
    "EndMarker",
    "KafkaUnavailableError",
    "KmqClient",
    "KmqConfig",
    "KmqError",
    "KmqProducer",
    "Marker",
    "MarkerDecodeError",
    "MarkerKey",
    "MarkerWriteError",
    "MarkerWriter",
    "Message",
    "Ordering",
    "OutgoingMessage",
    "Reject",
    "Retry",
    "SendResult",
    "StartMarker",
    "TopicMismatchError",
    "TopicMissingError",
    "TransactionError",
    "Worker",
    "WorkerConfig",
    "check_topics",
    "decode_marker",
    "ensure_topics",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'kmq' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next look-up is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
