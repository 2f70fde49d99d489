"""Consuming the markers topic in the tracker group: partition ownership, applying markers, committing the tail."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka import Message as KafkaMessage

from kmq.config import KafkaValue
from kmq.kafka import consumer_settings, fetch
from kmq.liveness import KafkaLiveness
from kmq.receipt_notes import HEADER as RECEIPT_HEADER
from kmq_tracker.alignment import PartitionCounts
from kmq_tracker.broker_clock import ClockLead
from kmq_tracker.config import TrackerConfig
from kmq_tracker.metrics import TrackerMetrics
from kmq_tracker.pacing import Backoff
from kmq_tracker.partition import PartitionState

_log = logging.getLogger(__name__)
BATCH = 10_000
# librdkafka pauses a partition's fetching for fetch.queue.backoff.ms (default 1 s) whenever its queue holds
# queued.min.messages (default 100 000 per partition, ~300 B of overhead each). Measured on tansu: a small queue
# with a short pause reads markers faster than the tracker applies them, and keeps the buffered memory to a few MB
# (the default queue took the tracker holding 1 M pending from ~125 MB to ~200 MB). The user's settings still win.
# Partitions added to the markers topic are assigned at the consumer's next metadata refresh: every 10 s, not 5 min.
_PREFETCH: dict[str, KafkaValue] = {
    "queued.min.messages": 2_000,
    "fetch.queue.backoff.ms": 10,
    "topic.metadata.refresh.interval.ms": 10_000,
}


# The broker's clock as this process reads it (kmq_tracker.broker_clock): one broker, so one per process. Its one
# writer is the loop thread (`MarkersIngest.poll`); any thread reads it.
CLOCK = ClockLead()
_local_offset_ms = [0]  # TrackerConfig.clock_offset_ms: tests only (a tracker host whose clock is off)


def local_ms() -> int:
    """This host's wall clock, in ms (shifted by `clock_offset_ms`, for tests only)."""
    return time.time_ns() // 1_000_000 + _local_offset_ms[0]


def now_ms() -> int:
    """The broker's time now: deadlines are LogAppendTime stamps plus a timeout, so they are compared with the
    broker's clock, estimated from the markers read (PROTOCOL.md, "Clocks")."""
    return CLOCK.broker_ms(local_ms())


class MarkersIngest:
    """The markers consumer (group T) and the state of every markers partition this replica owns."""

    def __init__(self, config: TrackerConfig, metrics: TrackerMetrics) -> None:
        self._config = config
        self._topic = config.kmq.markers_topic
        self._metrics = metrics
        self.partitions: dict[int, PartitionState] = {}
        self.joined = False  # True once the group gave this replica an assignment (possibly empty)
        self._committed: dict[int, int] = {}
        # Called on revocation, with the partitions revoked, before anything is committed or given up: the service
        # waits there for their running redelivery passes (each ends with its ENDs acknowledged), so the next owner
        # finds the ENDs of what this replica already copied.
        self.before_revoke: Callable[[list[int]], None] = lambda partitions: None
        # The user's consumer settings are the workers' too, so those the protocol depends on are pinned over them:
        # a new tracker group reads M from its beginning (with `latest` it would skip every START written before
        # it first ran), and nothing but `_commit` moves the committed offset past a pending START.
        settings = consumer_settings(
            config.kmq,
            config.group_id,
            enable_partition_eof=True,
            isolation_level=config.isolation_level,
            auto_offset_reset="earliest",
            enable_auto_offset_store=False,
        )
        self._consumer = Consumer({**_PREFETCH, **settings})
        _local_offset_ms[0] = config.clock_offset_ms
        # No silent stall: a probe of this consumer's brokers, for /healthz (kmq.liveness; run by the service's loop).
        self.liveness = KafkaLiveness(
            self._consumer, config.kmq, self._topic, f"the tracker's consumer of {self._topic}"
        )

    def subscribe(self) -> None:
        self._consumer.subscribe([self._topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost)

    def poll(self, timeout_s: float) -> int:
        """Read what arrives within `timeout_s` (returning at the first record) and apply it; the records read."""
        messages = fetch(self._consumer, BATCH, timeout_s)
        self._apply(messages, local_ms())
        return len(messages)

    def partition_counts(self, timeout_s: float) -> PartitionCounts | None:
        """The queue's and the markers topic's partition counts from fresh metadata; None when unknown now."""
        queue = self._config.kmq.queue_topic
        try:
            topics = self._consumer.list_topics(timeout=timeout_s).topics
        except KafkaException as e:
            _log.warning("no metadata to check the partition counts: %s", e)
            return None
        if queue not in topics or self._topic not in topics:
            return None
        return PartitionCounts(len(topics[queue].partitions), len(topics[self._topic].partitions))

    def commit(self) -> None:
        """Commit, per owned partition, the oldest pending START (else the read position) where it moved."""
        now = now_ms()
        for state in self.partitions.values():
            state.forget_notes(now)
        self._commit(list(self.partitions.values()))

    def close(self) -> None:
        """Commit, then leave the group (the revocation this triggers commits once more, harmlessly)."""
        try:
            self.commit()
        finally:
            self._consumer.close()

    def _apply(self, messages: Sequence[KafkaMessage], received_ms: int) -> None:
        """Apply the markers read at local time `received_ms`; the newest broker stamp of a partition read live (caught
        up: a record read while catching up is old) samples the broker's clock."""
        partitions = self.partitions
        undecodable = 0
        newest_live = 0
        now = CLOCK.broker_ms(received_ms)
        for message in messages:
            error = message.error()
            state = partitions.get(message.partition() or 0)
            if error is not None:
                self._on_error(error, state, message.offset())
            elif state is not None:
                kind, timestamp_ms = message.timestamp()
                stamp = now if kind == TIMESTAMP_NOT_AVAILABLE else timestamp_ms
                if kind == TIMESTAMP_LOG_APPEND_TIME and timestamp_ms > newest_live and state.caught_up:
                    newest_live = timestamp_ms
                headers = message.headers()  # None for markers of clients and trackers: only the facade's carry any
                note = _note_of(headers) if headers else None
                if note is None:
                    applied = state.apply(message.offset() or 0, stamp, message.key(), message.value())
                else:
                    applied = state.apply_noted(message.offset() or 0, stamp, message.key(), message.value(), note)
                if not applied:
                    undecodable += 1
        if newest_live:
            CLOCK.observe(newest_live, received_ms)
        self._observe_ends()
        self._metrics.markers_consumed.inc(len(messages))
        if undecodable:
            self._metrics.undecodable.inc(undecodable)

    def _observe_ends(self) -> None:
        """The high watermark cached by the last fetch of each owned partition: the catch-up target of a new
        assignment, and whether reading is at the end (the lag guard)."""
        for state in self.partitions.values():
            if state.position is None:
                continue
            high = self._consumer.get_watermark_offsets(TopicPartition(self._topic, state.partition), cached=True)[1]
            if state.catch_up_target is None:
                state.observe_end(high)
            state.observe_position(high)

    def _on_error(self, error: KafkaError, state: PartitionState | None, offset: int | None) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            if state is not None and offset is not None:
                state.reached_end(offset)
            return
        if error.fatal():
            raise KafkaException(error)
        _log.warning("markers consumer: %s", error.str())

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.joined = True
        for tp in partitions:
            backoff = Backoff(self._config.retry_backoff_ms, self._config.retry_backoff_max_ms)
            self.partitions.setdefault(tp.partition, PartitionState(self._topic, tp.partition, backoff))
            self._committed.pop(tp.partition, None)
        _log.info("assigned %s partitions %s", self._topic, sorted(tp.partition for tp in partitions))

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        owned = [self.partitions[tp.partition] for tp in partitions if tp.partition in self.partitions]
        try:
            self.before_revoke([tp.partition for tp in partitions])
            self._commit(owned)
        finally:
            self._drop(partitions)
        _log.info("revoked %s partitions %s", self._topic, sorted(tp.partition for tp in partitions))

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._drop(partitions)  # another replica may own them already: committing now could move its offsets
        _log.warning("lost %s partitions %s", self._topic, sorted(tp.partition for tp in partitions))

    def _drop(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.partitions.pop(tp.partition, None)
            self._committed.pop(tp.partition, None)
            self._metrics.drop_partition(self._topic, tp.partition)

    def _commit(self, states: Sequence[PartitionState]) -> None:
        offsets = [
            TopicPartition(self._topic, s.partition, offset)
            for s in states
            if (offset := s.commit_offset()) is not None and self._committed.get(s.partition) != offset
        ]
        if not offsets:
            return
        try:
            results = self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            _log.warning("committing %s offsets failed (retried at the next interval): %s", self._topic, e)
            return
        for tp in results or offsets:
            if tp.error is None:
                self._committed[tp.partition] = tp.offset
            else:
                _log.warning("committing %s[%d] failed: %s", self._topic, tp.partition, tp.error)


def _note_of(headers: object) -> bytes | None:
    """The value of a `kmq-receipt` header (the facade's settle note), if any; `headers` as a consumed record's
    `headers()` gives them (a list of name, value pairs)."""
    if isinstance(headers, list):
        for name, value in headers:
            if name == RECEIPT_HEADER and isinstance(value, bytes):
                return value
    return None
