"""Transactional mode: START markers and the queue offset commit in one Kafka transaction (PROTOCOL.md).

A transaction that fails or times out (commit_transaction raises, retriable or not) is aborted and the batch read
again; `TransactionError` says which. An abort that fails too (a timed-out commit may still be in progress) is
retried at the start of the next batch, so one bad commit never leaves the client stuck. A fatal error (the producer
was fenced, or broke) replaces the producer with a new one of the same transactional id, whose initialisation aborts
whatever the old one left open; `fatal_error` holds why, while that cannot be done.
"""

from __future__ import annotations

import logging
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kmq.config import KmqConfig
from kmq.errors import DeliveryError, TransactionalSetupError, TransactionError
from kmq.kafka import marker_producer_settings
from kmq.marker_writer import Offsets, StartWriter, first_of

_log = logging.getLogger(__name__)
_INIT_TIMEOUT_S = 30.0


class TransactionalStarts:
    """Writes a batch's STARTs and commits its offsets atomically: a START exists iff its offset was committed."""

    def __init__(self, config: KmqConfig, consumer: Consumer) -> None:
        self.config = config
        self.fatal_error: str | None = None  # set while the producer is broken and cannot be replaced
        self._consumer = consumer
        self._settings = marker_producer_settings(config, transactional_id=f"{config.group_id}-{uuid.uuid4().hex}")
        self._writer = StartWriter(config, self._new_producer(_INIT_TIMEOUT_S))
        self._needs_abort = False

    def starts_and_commit(
        self, offsets: Offsets, commit: list[TopicPartition], redeliver_after_ms: int, timeout_s: float
    ) -> None:
        """On failure the transaction is aborted (or marked to be, first thing next time) and TransactionError
        raised: the caller rewinds the batch."""
        where = (self.config.markers_topic, *first_of(offsets))
        self._recover(where, timeout_s)
        producer = self._writer.producer
        try:
            producer.begin_transaction()
            failures = self._writer.produce(offsets, redeliver_after_ms)
            producer.send_offsets_to_transaction(commit, self._consumer.consumer_group_metadata(), timeout_s)
            producer.commit_transaction(timeout_s)
            self._writer.wait(failures, timeout_s)
        except (KafkaException, DeliveryError) as e:
            aborted = self._abort(timeout_s, e)
            detail = _describe(e) + (
                f" (the producer cannot be replaced: {self.fatal_error})" if self.fatal_error else ""
            )
            raise TransactionError(*where, detail, aborted) from e

    def flush(self, timeout_s: float) -> int:
        return self._writer.flush(timeout_s)

    def _recover(self, where: tuple[str, int, int], timeout_s: float) -> None:
        """What a failed batch left: a broken producer to replace, a transaction to abort."""
        if self.fatal_error is not None and not self._replace(timeout_s):
            raise TransactionError(*where, f"the transactional producer cannot be replaced: {self.fatal_error}", True)
        if self._needs_abort and not self._abort(timeout_s, None):
            raise TransactionError(*where, "the previous batch's transaction could not be aborted yet", False)

    def _abort(self, timeout_s: float, cause: Exception | None) -> bool:
        """Abort the open transaction; True once nothing of it can commit any more."""
        if _is_fatal(cause):
            return self._replace(timeout_s)
        try:
            self._writer.producer.abort_transaction(timeout_s)
        except KafkaException as e:
            if _is_fatal(e):
                return self._replace(timeout_s)
            _log.warning("aborting a transaction to %s failed (%s); retrying next batch", self.config.markers_topic, e)
            self._needs_abort = True
            return False
        self._needs_abort = False
        return True

    def _replace(self, timeout_s: float) -> bool:
        """A new producer, same transactional id: initialising it fences the old one and aborts its transaction."""
        try:
            self._writer = StartWriter(self.config, self._new_producer(timeout_s))
        except (TransactionalSetupError, KafkaException) as e:  # (a Producer refusing its settings: the latter)
            self.fatal_error = e.detail if isinstance(e, TransactionalSetupError) else _describe(e)
            _log.error("the transactional producer for %s cannot be replaced: %s", self.config.markers_topic, e)
            return False
        self.fatal_error = None
        self._needs_abort = False
        return True

    def _new_producer(self, timeout_s: float) -> Producer:
        producer = Producer(self._settings)
        try:
            producer.init_transactions(timeout_s)
        except KafkaException as e:
            del producer  # its librdkafka threads go now, not with the traceback that would hold it
            raise TransactionalSetupError(str(self._settings["transactional.id"]), _describe(e)) from e
        return producer


def _is_fatal(error: Exception | None) -> bool:
    inner = error.args[0] if isinstance(error, KafkaException) and error.args else None
    return isinstance(inner, KafkaError) and inner.fatal()


def _describe(error: Exception) -> str:
    inner = error.args[0] if isinstance(error, KafkaException) and error.args else None
    return inner.str() if isinstance(inner, KafkaError) else str(error)
