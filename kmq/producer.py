"""`KmqProducer`: sends messages to the queue topic (idempotent, `acks=all`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType

from confluent_kafka import KafkaError, Producer
from confluent_kafka import Message as KafkaMessage

from kmq.admin import check_topics
from kmq.config import KmqConfig
from kmq.delivery import DeliveryGroup
from kmq.errors import ClientClosedError, DeliveryError
from kmq.headers import SendHeaders
from kmq.kafka import ANY_PARTITION, DeliveryCallback, produce, producer_settings

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """A message to send; `partition=None` lets the key (or the sticky partitioner) choose."""

    value: bytes | None
    key: bytes | None = None
    headers: SendHeaders | None = None  # a mapping or any sequence of (name, value) pairs (a received Message's too)
    partition: int | None = None


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where the broker stored a sent message."""

    topic: str
    partition: int
    offset: int


class KmqProducer:
    """Sends to the queue topic. `send` is asynchronous; `flush` raises if anything sent since failed."""

    def __init__(self, config: KmqConfig, check: bool = True) -> None:
        if check:
            check_topics(config)
        self.config = config
        self._producer = Producer(producer_settings(config))
        self._failed: list[DeliveryError] = []
        self._closed = False

    def send(
        self,
        value: bytes | None,
        key: bytes | None = None,
        headers: SendHeaders | None = None,
        partition: int | None = None,
    ) -> None:
        """Queue one message for sending; failures surface at the next `flush()`."""
        self._produce(OutgoingMessage(value, key, headers, partition), self._on_delivery)

    def send_batch(self, messages: Iterable[OutgoingMessage], timeout_s: float = 30.0) -> list[SendResult]:
        """Send messages and wait until each is acknowledged; results in the order given."""
        group = DeliveryGroup()
        for index, message in enumerate(messages):
            self._produce(message, group.callback(index))
        group.wait(self._producer, timeout_s)
        return [SendResult(d.topic, d.partition, d.offset) for _, d in sorted(group.results.items())]

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every queued message; raise DeliveryError for the first that failed."""
        remaining = self._producer.flush(timeout_s)
        if remaining:
            raise DeliveryError(self.config.queue_topic, None, f"{remaining} messages not acknowledged in {timeout_s}s")
        if self._failed:
            failed, self._failed = self._failed, []
            raise failed[0]

    def close(self, timeout_s: float = 30.0) -> None:
        if not self._closed:
            self._closed = True
            self.flush(timeout_s)

    def __enter__(self) -> KmqProducer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _produce(self, message: OutgoingMessage, callback: DeliveryCallback) -> None:
        if self._closed:
            raise ClientClosedError("KmqProducer is closed")
        partition = ANY_PARTITION if message.partition is None else message.partition
        produce(
            self._producer, self.config.queue_topic, message.value, message.key, message.headers, partition, callback
        )
        self._producer.poll(0)

    def _on_delivery(self, error: KafkaError | None, message: KafkaMessage) -> None:
        if error is not None:
            topic = message.topic() or self.config.queue_topic
            _log.error("send to %s[%s] failed: %s", topic, message.partition(), error.str())
            self._failed.append(DeliveryError(topic, message.partition(), error.str()))
