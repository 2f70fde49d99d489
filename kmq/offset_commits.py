"""The client's asynchronous offset commits (PROTOCOL.md, "Client flow", step 3).

A batch's offsets are committed without waiting, once its STARTs are durable: a commit that fails or is lost then
costs re-reads (duplicates), never a message. Until the broker confirms a commit, its offsets stay *unconfirmed* here
and go out again with the next batch's commit, so a partition that gets no more messages is not left behind. When the
group takes partitions away, and on `close()`, what is still unconfirmed for them is committed and waited for, so the
next owner resumes where this client stopped (librdkafka also waits for commits in flight before it gives partitions
up or closes). Failures are logged and counted in `failed`, never raised.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

_log = logging.getLogger(__name__)


class AsyncCommits:
    """Commits a consumer's offsets asynchronously and keeps those not confirmed yet. `on_commit` is the consumer's
    `on_commit` setting and `on_revoke` its subscription's (served by whichever thread calls the consumer)."""

    def __init__(self, topic: str) -> None:
        self._topic = topic
        self._unconfirmed: dict[int, int] = {}  # partition -> next offset handed over, commit not confirmed yet
        self._lock = threading.Lock()
        self.failed = 0  # commits (or a partition's part of one) the broker refused or that never went out

    def commit(self, consumer: Consumer, next_offsets: Mapping[int, int]) -> None:
        """Send the batch's offsets, and every one still unconfirmed, without waiting."""
        with self._lock:
            self._unconfirmed.update(next_offsets)
            offsets = self._partitions(self._unconfirmed)
        try:
            consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as e:  # refused before it went out: sent again with the next batch's commit
            self._failed(_detail(e))

    def on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """An asynchronous commit's result: confirmed offsets are forgotten, a failure counted (and sent again)."""
        if error is not None:
            if error.code() != KafkaError._NO_OFFSET:
                self._failed(error.str())
            return
        failed = []
        with self._lock:
            for tp in partitions:
                if tp.error is not None:
                    failed.append(f"partition {tp.partition} ({tp.error.str()})")
                elif self._unconfirmed.get(tp.partition) == tp.offset:  # not a newer batch's offset meanwhile
                    del self._unconfirmed[tp.partition]
        if failed:
            self._failed(", ".join(failed))

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """The group takes these partitions away (or they are lost): commit what is unconfirmed of them, then forget
        them (a new owner commits its own)."""
        revoked = {tp.partition for tp in partitions if tp.topic == self._topic}
        with self._lock:
            leaving = {p: offset for p, offset in self._unconfirmed.items() if p in revoked}
            for partition in leaving:
                del self._unconfirmed[partition]
        self._commit_now(consumer, leaving)

    def close(self, consumer: Consumer) -> None:
        """Before the consumer closes: commit what is unconfirmed of the partitions still assigned, and wait."""
        try:
            assigned = {tp.partition for tp in consumer.assignment()}
        except KafkaException as e:
            _log.info("reading the assignment of %s at close: %s", self._topic, e)
            assigned = set()
        with self._lock:
            left = {p: offset for p, offset in self._unconfirmed.items() if p in assigned}
            self._unconfirmed.clear()
        self._commit_now(consumer, left)

    @property
    def unconfirmed(self) -> dict[int, int]:
        with self._lock:
            return dict(self._unconfirmed)

    def _commit_now(self, consumer: Consumer, next_offsets: Mapping[int, int]) -> None:
        if not next_offsets:
            return
        try:
            committed = consumer.commit(offsets=self._partitions(next_offsets), asynchronous=False) or []
        except KafkaException as e:
            self._failed(_detail(e))
            return
        failed = [f"partition {tp.partition} ({tp.error.str()})" for tp in committed if tp.error is not None]
        if failed:
            self._failed(", ".join(failed))

    def _partitions(self, next_offsets: Mapping[int, int]) -> list[TopicPartition]:
        return [TopicPartition(self._topic, partition, offset) for partition, offset in next_offsets.items()]

    def _failed(self, detail: str) -> None:
        self.failed += 1
        _log.warning(
            "committing %s offsets failed (%s): the messages after the last commit will be read again (duplicates)",
            self._topic,
            detail,
        )


def _detail(error: KafkaException) -> str:
    first = error.args[0] if error.args else None
    return first.str() if isinstance(first, KafkaError) else str(error)
