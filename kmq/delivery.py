"""Waiting for produced records to be acknowledged: all their reports (`DeliveryGroup`), or failures only."""

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
    errors: dict[int, KafkaError] = field(default_factory=dict)  # why each failed record failed, by index

    def callback(self, index: int) -> DeliveryCallback:
        """The callback for the `index`-th record; its result lands in `results[index]`."""
        self.outstanding += 1
        return functools.partial(self._report, index)

    def refused(self, index: int, error: KafkaError) -> None:
        """The `index`-th record was refused at once by `produce()`: its callback will never be called."""
        self.outstanding -= 1
        self.errors[index] = error

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

    def _report(self, index: int, error: KafkaError | None, message: KafkaMessage) -> None:
        self.outstanding -= 1
        topic = message.topic() or ""
        if error is not None:
            self.failures.append(DeliveryError(topic, message.partition(), error.str()))
            self.errors[index] = error
            return
        self.results[index] = Delivered(topic, message.partition() or 0, message.offset() or 0)


class Failures:
    """Collects the failed deliveries of the records produced with `report` as their callback.

    For producers with `delivery.report.only.error`: a success reports nothing, so success is the producer's
    `flush()` returning 0 with nothing collected here. One instance per unit of work (e.g. a batch of START
    markers), so that a late failure of an earlier unit is never taken for one of this unit.
    """

    __slots__ = ("errors",)

    def __init__(self) -> None:
        self.errors: list[DeliveryError] = []

    def report(self, error: KafkaError | None, message: KafkaMessage) -> None:
        if error is not None:
            self.errors.append(DeliveryError(message.topic() or "", message.partition(), error.str()))

    def check(self, remaining: int, timeout_s: float) -> None:
        """After `flush(timeout_s)` returned `remaining`: raise the first failure, or a timeout when any remain."""
        if self.errors:
            raise self.errors[0]
        if remaining > 0:
            raise DeliveryError("(batch)", None, f"{remaining} records not acknowledged within {timeout_s}s")
