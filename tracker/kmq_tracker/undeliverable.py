"""Copies the broker or the producer refuses for good (PROTOCOL.md, Tracker; issue 15, item 1).

A copy too large once kmq's headers are added (RECORD_TOO_LARGE, or larger than the producer's message.max.bytes),
with an invalid timestamp, or refused by authorization, will never be written: retrying it would stall its
partition and copy its neighbours again on every retry. It goes to the dead-letter topic instead, with reason
`undeliverable: <error>`; if the dead-letter topic refuses it too, a dead letter with the value cut to
`TRUNCATED_VALUE_BYTES` and a `kmq-dlq-truncated` header (the original length) is written; if even that is refused,
it is logged and counted as unwritable. Then the caller ENDs it. A transient failure at any step leaves it pending.
"""

from __future__ import annotations

import logging
from enum import Enum

from confluent_kafka import KafkaError, KafkaException, Producer

from kmq.config import KmqConfig
from kmq.delivery import DeliveryGroup
from kmq.errors import DeliveryError
from kmq.headers import DLQ_TRUNCATED, REASON_UNDELIVERABLE, dead_letter
from kmq.kafka import produce
from kmq_tracker.reader import QueueRecord

_log = logging.getLogger(__name__)
TRUNCATED_VALUE_BYTES = 1024
# Local errors librdkafka raises or reports that may pass: the record is retried, not dead-lettered.
_TRANSIENT = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._QUEUE_FULL,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
    }
)


class Fate(Enum):
    """What became of an undeliverable copy."""

    DEAD_LETTERED = "dead-lettered"
    TRUNCATED = "dead-lettered with its value truncated"
    UNWRITABLE = "refused by the dead-letter topic too"


def is_permanent(error: KafkaError) -> bool:
    """A refusal that will not pass by retrying (a fatal error is the producer's, not the record's)."""
    return not (error.retriable() or error.fatal() or error.code() in _TRANSIENT)


class UndeliverableWriter:
    """Writes undeliverable copies to the dead-letter topic, waiting for each (they are rare)."""

    def __init__(self, config: KmqConfig, producer: Producer, timeout_s: float) -> None:
        self._config = config
        self._producer = producer
        self._timeout_s = timeout_s

    def write(self, partition: int, record: QueueRecord, error: KafkaError) -> Fate | None:
        """Its fate, or None when a write failed for a reason that may pass (the copy stays pending)."""
        reason = f"{REASON_UNDELIVERABLE}: {error.str()}"
        headers = dead_letter(record.headers, self._config.queue_topic, partition, record.offset, reason)
        refusal = self._dead_letter(record.value, record.key, headers)
        if refusal is None:
            return self._log(partition, record, error, Fate.DEAD_LETTERED)
        if not is_permanent(refusal):
            return None
        length = str(len(record.value or b"")).encode()
        cut = (record.value or b"")[:TRUNCATED_VALUE_BYTES]
        refusal = self._dead_letter(cut, record.key, [*headers, (DLQ_TRUNCATED, length)])
        if refusal is None:
            return self._log(partition, record, error, Fate.TRUNCATED)
        return self._log(partition, record, error, Fate.UNWRITABLE) if is_permanent(refusal) else None

    def _dead_letter(
        self, value: bytes | None, key: bytes | None, headers: list[tuple[str, bytes | None]]
    ) -> KafkaError | None:
        """None once the dead letter is acknowledged, else why not."""
        group = DeliveryGroup()
        try:
            produce(self._producer, self._config.dead_letter_topic, value, key, headers, on_delivery=group.callback(0))
        except KafkaException as e:
            return e.args[0] if e.args else KafkaError(KafkaError._FAIL)
        try:
            group.wait(self._producer, self._timeout_s)
        except DeliveryError:
            return group.errors.get(0, KafkaError(KafkaError._MSG_TIMED_OUT))
        return None

    def _log(self, partition: int, record: QueueRecord, error: KafkaError, fate: Fate) -> Fate:
        level = logging.ERROR if fate is Fate.UNWRITABLE else logging.WARNING
        where = f"{self._config.queue_topic}[{partition}]@{record.offset}"
        _log.log(level, "copy of %s refused for good (%s): %s", where, error.str(), fate.value)
        return fate
