"""kmq: individual message acknowledgement and redelivery for Kafka work queues."""

from __future__ import annotations

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
from kmq.worker import Reject, Retry, Worker, WorkerConfig

__all__ = [
    "BrokerUnavailableError",
    "ClientClosedError",
    "CommitError",
    "ConfigError",
    "DeliveryError",
    "DurationTooLongError",
    "EmbeddedBrokerError",
    "EndMarker",
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
