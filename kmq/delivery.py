"""Waiting for a group of produced records to be acknowledged."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Producer
from confluent_kafka import Message as KafkaMessage

from kmq.errors import DeliveryError
from kmq.kafka import DeliveryCallback


@dataclass(frozen=True, slots=True)
class Delivered:
    """Where the broker stored one record."""

    topic: str
    partition: int
    offset: int


@dataclass(eq=False)
class DeliveryGroup:
    """Collects the delivery reports of the records produced with one of its callbacks."""

    outstanding: int = 0
    failures: list[DeliveryError] = field(default_factory=list)
    results: dict[int, Delivered] = field(default_factory=dict)

    def callback(self, index: int) -> DeliveryCallback:
        """The callback for the `index`-th record; its result lands in `results[index]`."""
        self.outstanding += 1
        return functools.partial(self._report, index)

    def counted(self) -> DeliveryCallback:
        """The callback for a record whose failure matters but whose result does not (nothing lands in `results`).

        One bound method for every record: no per-record object, which matters for the client's START markers."""
        self.outstanding += 1
        return self._count

    def wait(self, producer: Producer, timeout_s: float) -> None:
        """Serve delivery reports until every record is acknowledged; raise on the first failure or at the deadline."""
        deadline = time.monotonic() + timeout_s
        producer.flush(timeout_s)
        while self.outstanding > 0 and time.monotonic() < deadline:
            producer.poll(min(0.05, max(0.0, deadline - time.monotonic())))
        if self.failures:
            raise self.failures[0]
        if self.outstanding > 0:
            raise DeliveryError("(batch)", None, f"{self.outstanding} records not acknowledged within {timeout_s}s")

    def _count(self, error: KafkaError | None, message: KafkaMessage) -> None:
        self.outstanding -= 1
        if error is not None:
            self.failures.append(DeliveryError(message.topic() or "", message.partition(), error.str()))

    def _report(self, index: int, error: KafkaError | None, message: KafkaMessage) -> None:
        self.outstanding -= 1
        topic = message.topic() or ""
        if error is not None:
            self.failures.append(DeliveryError(topic, message.partition(), error.str()))
            return
        self.results[index] = Delivered(topic, message.partition() or 0, message.offset() or 0)
