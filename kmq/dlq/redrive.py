"""`redrive`: dead letters back to their queue — original key, value and headers, a fresh delivery count — once.

Idempotent: each transaction writes a batch of copies to the queue *and* a redrive marker on the dead-letter topic
listing the dead letters it sent back; the reader applies those markers (read_committed), so a dead letter already
redriven is skipped. Copies and marker commit together or not at all: a crash never sends one twice nor loses one.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import KafkaException, Producer

from kmq.config import KmqConfig
from kmq.dlq.reader import read_dead_letters
from kmq.dlq.records import REDRIVE_MARKER, DeadLetter, DeadLetterFilter, encode_marker
from kmq.errors import DeliveryError
from kmq.kafka import produce, producer_settings

_log = logging.getLogger(__name__)
BATCH = 500
TIMEOUT_S = 30.0


class Selection(Protocol):
    """Which dead letters: a `DeadLetterFilter`, or any object that decides one by one."""

    def matches(self, dead: DeadLetter) -> bool: ...


@dataclass(frozen=True, slots=True)
class RedriveResult:
    """`redriven`: sent back now; `already`: selected but redriven before; `foreign`: from another queue (left)."""

    redriven: int
    already: int
    foreign: int


def redrive(
    config: KmqConfig,
    selection: DeadLetterFilter | Selection,
    progress: Callable[[int, int], None] | None = None,
    batch: int = BATCH,
    target_topic: str | None = None,
) -> RedriveResult:
    """Send the selected dead letters of `config`'s queue back to it; `progress(done, total)` after each batch.

    With `target_topic` they go to that queue instead (moved: any partition), and count as redriven here."""
    selected = [dead for dead in read_dead_letters(config) if selection.matches(dead)]
    foreign = [dead for dead in selected if dead.origin_topic != config.queue_topic]
    already = [dead for dead in selected if dead.redriven and dead.origin_topic == config.queue_topic]
    todo = [dead for dead in selected if not dead.redriven and dead.origin_topic == config.queue_topic]
    if foreign:
        _log.warning("%d selected dead letters came from other topics: left alone", len(foreign))
    if todo:
        _send(config, todo, progress, batch, target_topic)
    return RedriveResult(len(todo), len(already), len(foreign))


def _send(
    config: KmqConfig,
    todo: list[DeadLetter],
    progress: Callable[[int, int], None] | None,
    batch: int,
    target_topic: str | None,
) -> None:
    # One transactional.id per dead-letter topic: a second redrive of the same topic fences an unfinished first.
    settings = producer_settings(config, transactional_id=f"kmq-redrive-{config.dead_letter_topic}")
    producer = Producer(settings)
    producer.init_transactions(TIMEOUT_S)
    try:
        for start in range(0, len(todo), batch):
            _transaction(producer, config, todo[start : start + batch], target_topic)
            if progress is not None:
                progress(min(start + batch, len(todo)), len(todo))
    finally:
        producer.flush(TIMEOUT_S)


def _transaction(producer: Producer, config: KmqConfig, chunk: list[DeadLetter], target_topic: str | None) -> None:
    failures: list[str] = []

    def report(error: object, message: object) -> None:
        if error is not None:
            failures.append(str(error))

    producer.begin_transaction()
    try:
        for dead in chunk:
            produce(
                producer,
                target_topic or config.queue_topic,
                dead.value,
                dead.key,
                dead.copy_headers(config.dead_letter_topic),
                partition=dead.origin_partition if dead.origin_partition is not None and not target_topic else -1,
                on_delivery=report,
            )
        marker = encode_marker([(dead.partition, dead.offset) for dead in chunk])
        produce(
            producer,
            config.dead_letter_topic,
            marker,
            f"redrive-{uuid.uuid4().hex}".encode(),
            [(REDRIVE_MARKER, b"1")],
            on_delivery=report,
        )
        producer.commit_transaction(TIMEOUT_S)
    except KafkaException as e:
        producer.abort_transaction(TIMEOUT_S)
        raise DeliveryError(config.queue_topic, None, f"redrive transaction aborted: {e}") from e
    if failures:
        raise DeliveryError(config.queue_topic, None, f"redrive: {failures[0]}")
