"""Redelivering due messages of one queue partition: copy (or dead-letter), then END the old key.

PROTOCOL.md, Tracker: read the message at (Q, p, offset); if its count would pass `max_redeliveries` write it to D,
otherwise produce the copy to Q partition p; only after that write is acknowledged, write END for the old key. A
message that retention already removed is counted, logged and ENDed; an offset that holds no data record (a
transaction marker, an aborted record: PROTOCOL.md "Offsets that hold no record") is counted and ENDed. Everything
not settled is left pending: the caller retries it after a backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import Message as KafkaMessage

from kmq.batch_markers import BatchEnd, runs_of, split_runs
from kmq.delivery import DeliveryGroup
from kmq.errors import DeliveryError
from kmq.headers import REASON_MAX_REDELIVERIES, dead_letter, redelivered, redelivery_count
from kmq.kafka import DeliveryCallback, produce, producer_settings
from kmq.markers import EndMarker, MarkerKey
from kmq_tracker.config import TrackerConfig
from kmq_tracker.ingest import now_ms
from kmq_tracker.reader import EndProbe, QueueReader, QueueRecord
from kmq_tracker.undeliverable import Fate, UndeliverableWriter, is_permanent

_log = logging.getLogger(__name__)
_END = EndMarker().encode()
_MAX_BATCH_SPAN = 2**31 - 1  # a batch marker gives each run's start as an int32 gap from the previous run's end


@dataclass(frozen=True, slots=True)
class EndProbed:
    """A pass's fresh look at its markers partition's end that did not confirm it was read (the lag guard,
    kmq_tracker.partition): the end lies past `position`, or no answer came (`end` None)."""

    position: int
    end: int | None
    sent_ms: int  # broker time the fetch was sent: everything written before then lies below `end`
    waiting: int  # offsets the pass left pending for it


@dataclass(slots=True)
class Redelivered:
    """The outcome of one pass over a partition's due offsets."""

    copied: list[int] = field(default_factory=list)
    dead_lettered: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    no_record: list[int] = field(default_factory=list)  # a transaction marker or an aborted record: finished
    failed: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    truncated: list[int] = field(default_factory=list)  # undeliverable, dead-lettered with the value cut (also above)
    unwritable: list[int] = field(default_factory=list)  # undeliverable, and refused by the dead-letter topic too
    end_failures: list[str] = field(default_factory=list)  # ENDs not written: those keys may be redelivered again
    copied_at_ms: int = 0  # wall clock when the copies and dead letters were acknowledged (0: none written)
    # Set when the pass's markers partition could not be confirmed as read to its end: only the offsets a marker
    # read vouched for were redelivered, the others stay pending.
    unconfirmed: EndProbed | None = None

    @property
    def settled(self) -> list[int]:
        """Queue offsets that are no longer pending: an END for each has been written."""
        return [*self.copied, *self.dead_lettered, *self.missing, *self.no_record, *self.unwritable]


class Redeliverer:
    """The Kafka side of redelivery: a queue reader, a probe of the markers partitions' ends, and one idempotent
    producer for copies, dead letters and ENDs."""

    def __init__(self, config: TrackerConfig) -> None:
        self._config = config
        self._kmq = config.kmq
        self._write_timeout_s = config.write_timeout_ms / 1000
        self._reader = QueueReader(config)
        self._ends = EndProbe(config)
        settings = producer_settings(config.kmq, message_timeout_ms=config.write_timeout_ms)
        self._producer = Producer({**settings, "error_cb": self._on_producer_error})
        self._undeliverable = UndeliverableWriter(config.kmq, self._producer, self._write_timeout_s)
        self._end_failures: list[str] = []
        self._fatal: KafkaError | None = None
        self._known: set[int] = set()  # queue partitions the reader's and the producer's metadata know

    def markers_end(self, partition: int, near: int) -> int | None:
        """The end of markers partition `partition` as a fetch sent now finds it (`near`: an offset close to it);
        None when no answer came in time (the probe is then replaced, as `_renew_reader` says why)."""
        end = self._ends.end(partition, near)
        if end is None:
            self._ends = _replace(self._ends, EndProbe(self._config))
        return end

    def redeliver(self, partition: int, offsets: Sequence[int]) -> Redelivered:
        self._raise_if_fatal()
        self._learn(partition)
        outcome = Redelivered()
        read = self._reader.read(partition, offsets)
        if read.unread and not read.found:
            self._renew_reader()
        outcome.missing.extend(read.missing)
        outcome.no_record.extend(read.no_record)
        outcome.failed.extend(read.unread)
        if read.error is not None:
            outcome.errors.append(f"reading {self._kmq.queue_topic}[{partition}]: {read.error}")
        for offset in read.missing:
            _log.warning(
                "%s[%d]@%d is no longer in the topic (retention?): ending it", self._kmq.queue_topic, partition, offset
            )
        self._write_copies(partition, read.found, outcome)
        if read.no_record:
            _log.debug("%s[%d] offsets %s hold no record (transaction markers, aborted records): ending them",
                       self._kmq.queue_topic, partition, read.no_record)  # fmt: skip
        absent = outcome.missing + outcome.no_record + outcome.unwritable
        self._write_ends(partition, outcome.copied + outcome.dead_lettered, absent)
        self._flush_ends(outcome)
        return outcome

    def _renew_reader(self) -> None:
        """A read that reached nothing in time gets a new reader for the next pass. librdkafka can hold a
        partition's fetching behind a request to a leader that stopped answering (a paused or frozen broker) until
        that request times out, socket.timeout.ms and its retries: minutes in which every read of the partition
        finds nothing, although the cluster answers again. A new consumer starts from fresh metadata."""
        self._reader = _replace(self._reader, QueueReader(self._config))

    def _flush_ends(self, outcome: Redelivered) -> None:
        """Wait for this pass's ENDs: once a pass returns, nothing of its partition is left queued in the producer,
        so a revocation only has to wait for the partition's running pass (its next owner then finds the ENDs)."""
        remaining = self._producer.flush(self._write_timeout_s)
        if remaining:
            outcome.end_failures.append(f"{remaining} END markers not acknowledged within {self._write_timeout_s}s")
        outcome.end_failures.extend(self.poll())

    def warm_up(self) -> None:
        """Connect the reader and the producer and learn the queue's partition leaders, so that the first pass does
        not pay for it."""
        try:
            self._refresh()
        except KafkaException as e:
            _log.warning("redelivery worker could not reach the cluster yet (its first pass will retry): %s", e)

    def _learn(self, partition: int) -> None:
        """Make the reader and the producer know `partition` before a pass over it. One added while they ran (`kmq
        topics grow`) stays unknown to librdkafka until its next metadata refresh (topic.metadata.refresh.interval.ms,
        5 minutes by default): until then its reads time out and its copies and ENDs are refused."""
        if partition in self._known:
            return
        try:
            self._refresh()
        except KafkaException as e:  # the pass goes on: its reads or writes fail, and it is retried
            _log.warning("refreshing the metadata of %s failed: %s", self._kmq.queue_topic, e)

    def _refresh(self) -> None:
        timeout_s = self._config.read_timeout_ms / 1000
        known = self._reader.partitions()
        self._ends.warm_up()
        for topic in (self._kmq.queue_topic, self._kmq.markers_topic):
            self._producer.list_topics(topic, timeout=timeout_s)
        self._known = known

    def poll(self) -> list[str]:
        """Serve delivery reports; returns the END writes that failed since the last call.

        Raises the producer's fatal error, if it had one: it will never write again, so every due message would
        fail and back off forever while the replica looks alive. Raising ends the pass, then the loop (it re-raises
        what a pass raised), and the replica restarts.
        """
        self._producer.poll(0)
        self._raise_if_fatal()
        failures, self._end_failures = self._end_failures, []
        return failures

    def close(self) -> None:
        """Flush what is still queued (ENDs), then close the queue reader and the end probe."""
        try:
            remaining = self._producer.flush(self._write_timeout_s)
            if remaining:
                _log.error("%d END markers were not acknowledged before shutdown", remaining)
        finally:
            try:
                self._reader.close()
            finally:
                self._ends.close()

    def _write_copies(self, partition: int, records: Sequence[QueueRecord], outcome: Redelivered) -> None:
        # Each record goes either to Q (a copy) or to D (a dead letter); then wait until every one is acknowledged.
        if not records:
            return
        group = DeliveryGroup()
        to_dead_letter = [redelivery_count(r.headers) + 1 > self._kmq.max_redeliveries for r in records]
        for index, (record, dead) in enumerate(zip(records, to_dead_letter, strict=True)):
            try:
                self._produce_one(partition, record, dead, group.callback(index))
            except KafkaException as e:  # refused at once (e.g. larger than message.max.bytes): the others go on
                group.refused(index, e.args[0] if e.args else KafkaError(KafkaError._FAIL))
        try:
            group.wait(self._producer, self._write_timeout_s)
        except DeliveryError as e:
            outcome.errors.append(str(e))
        outcome.copied_at_ms = now_ms()  # the broker's clock, as the deadlines
        for index, (record, dead) in enumerate(zip(records, to_dead_letter, strict=True)):
            if index in group.results:
                (outcome.dead_lettered if dead else outcome.copied).append(record.offset)
            elif index in group.errors and is_permanent(group.errors[index]):
                self._write_undeliverable(partition, record, group.errors[index], outcome)
            else:
                outcome.failed.append(record.offset)

    def _write_undeliverable(
        self, partition: int, record: QueueRecord, error: KafkaError, outcome: Redelivered
    ) -> None:
        """A copy refused for good goes to the dead-letter topic (see tracker.undeliverable), then is ENDed."""
        fate = self._undeliverable.write(partition, record, error)
        if fate is None:
            outcome.failed.append(record.offset)
            outcome.errors.append(f"dead-lettering undeliverable offset {record.offset} failed, will retry")
        elif fate is Fate.UNWRITABLE:
            outcome.unwritable.append(record.offset)
        else:
            outcome.dead_lettered.append(record.offset)
            if fate is Fate.TRUNCATED:
                outcome.truncated.append(record.offset)

    def _produce_one(self, partition: int, record: QueueRecord, dead: bool, callback: DeliveryCallback) -> None:
        if dead:
            headers = dead_letter(
                record.headers, self._kmq.queue_topic, partition, record.offset, REASON_MAX_REDELIVERIES
            )
            produce(
                self._producer, self._kmq.dead_letter_topic, record.value, record.key, headers, on_delivery=callback
            )
            return
        headers = redelivered(record.headers, record.offset)
        produce(
            self._producer,
            self._kmq.queue_topic,
            record.value,
            record.key,
            headers,
            partition=partition,
            on_delivery=callback,
            timestamp_ms=record.timestamp_ms,
        )

    def _write_ends(self, partition: int, written: list[int], absent: list[int]) -> None:
        """END every settled offset (awaited by `_flush_ends`; one that fails only costs a duplicate). With batch
        markers the offsets copied or dead-lettered take one BATCH END (PROTOCOL.md, Tracker state); those the queue
        does not hold (retention, or a garbage START naming any int64) each take a kmq END, as in the kmq format."""
        written = sorted(written)
        if self._kmq.marker_format == "batch" and written and written[-1] - written[0] <= _MAX_BATCH_SPAN:
            for runs in split_runs(runs_of(written)):
                self._produce_end(partition, runs[0][0], BatchEnd(runs).encode())
        else:
            absent = written + absent
        for offset in absent:
            self._produce_end(partition, offset, _END)
        self._producer.poll(0)

    def _produce_end(self, partition: int, offset: int, value: bytes) -> None:
        key = MarkerKey(partition, offset).encode()
        try:
            produce(self._producer, self._kmq.markers_topic, value, key, partition=partition, on_delivery=self._on_end)
        except KafkaException as e:
            self._end_failures.append(f"END to {self._kmq.markers_topic}[{partition}] for offset {offset}: {e}")

    def _on_producer_error(self, error: KafkaError) -> None:
        if error.fatal():
            _log.error("redelivery producer: fatal error: %s", error.str())
            self._fatal = self._fatal or error
        else:
            _log.warning("redelivery producer: %s", error.str())

    def _raise_if_fatal(self) -> None:
        if self._fatal is not None:
            raise KafkaException(self._fatal)

    def _on_end(self, error: KafkaError | None, message: KafkaMessage) -> None:
        if error is not None:
            self._end_failures.append(f"END to {message.topic()}[{message.partition()}]: {error.str()}")


class _Client(Protocol):
    def warm_up(self) -> None: ...
    def close(self) -> None: ...


_C = TypeVar("_C", bound=_Client)


def _replace(old: _Client, fresh: _C) -> _C:
    """Close `old` and connect `fresh`, made before it (its first fetch would otherwise wait for the connection:
    measured, ~0.5 s); a cluster that does not answer now only leaves that to the next pass."""
    old.close()
    try:
        fresh.warm_up()
    except KafkaException as e:
        _log.debug("warming up a redelivery client failed: %s", e)
    return fresh
