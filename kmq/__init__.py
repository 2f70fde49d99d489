"""kmq: individual message acknowledgement and redelivery for Kafka work queues."""

from __future__ import annotations

from kmq.config import KmqConfig
from kmq.errors import (
    BrokerUnavailableError,
    ClientClosedError,
    CommitError,
    ConfigError,
    DeliveryError,
    EmbeddedBrokerError,
    KmqError,
    MarkerDecodeError,
    MarkerWriteError,
    TopicMismatchError,
    TopicMissingError,
)
from kmq.markers import EndMarker, Marker, MarkerKey, StartMarker, decode_marker
from kmq.message import Message

__all__ = [
    "BrokerUnavailableError",
    "ClientClosedError",
    "CommitError",
    "ConfigError",
    "DeliveryError",
    "EmbeddedBrokerError",
    "EndMarker",
    "KmqConfig",
    "KmqError",
    "Marker",
    "MarkerDecodeError",
    "MarkerKey",
    "MarkerWriteError",
    "Message",
    "StartMarker",
    "TopicMismatchError",
    "TopicMissingError",
    "decode_marker",
]
