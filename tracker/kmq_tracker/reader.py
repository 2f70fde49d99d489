"""Reading due messages back from the queue topic by offset (a consumer outside any group: `assign` + seek)."""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaMessage

from kmq.config import KafkaValue
from kmq.headers import Headers, from_kafka
from kmq.kafka import consumer_settings, fetch
from kmq_tracker.config import TrackerConfig

_log = logging.getLogger(__name__)
# Offsets further apart than this are read as separate runs (a seek) rather than by reading through the gap.
MAX_GAP = 500
_BATCH = 500
# The markers end probe's fetches (EndProbe): from the leader (a follower's high watermark lags it), and no more than
# a few records buffered.
_PROBE: dict[str, KafkaValue] = {
    "client.rack": "",
    "fetch.max.bytes": 1024,
    "max.partition.fetch.bytes": 1024,
    "message.max.bytes": 1000,
}
# Each read re-assigns the partition, and librdkafka sends the next fetch only once the one in flight returns: a fetch
# parked at the partition's end waits out fetch.wait.max.ms (500 ms by default on Apache Kafka). Measured on Kafka
# 4.4: three offsets read in ~1 s with the default, ~25 ms with this. Pinned over the user's consumer settings.
READER_FETCH = {"fetch.wait.max.ms": 10}
# What the queue reader may fetch ahead of the offsets it reads. librdkafka's defaults (100 000 messages or 64 MiB)
# let a reader left assigned to a partition fill its local queue with the partition's tail: measured, 70 MB of RSS
# after one read of three offsets from a partition of 200 000 messages of 300 bytes. A queue over the bound postpones
# the next fetch by fetch.queue.backoff.ms (1 s by default), which would make a long run's read take seconds.
_READ_AHEAD: dict[str, KafkaValue] = {
    "queued.min.messages": 2 * _BATCH,
    "queued.max.messages.kbytes": 2048,
    "fetch.queue.backoff.ms": 1,
}


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """One message of the queue topic as it was first written."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int  # 0 when the record has none (the producer then stamps the copy)


@dataclass(slots=True)
class ReadResult:
    """What one read found: the records, the offsets the topic no longer holds (or never held), the offsets that
    hold no data record, and those not reached in time."""

    found: list[QueueRecord] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)  # below the log start (retention), negative, past the end
    no_record: list[int] = field(default_factory=list)  # a transaction marker or an aborted record (PROTOCOL.md)
    unread: list[int] = field(default_factory=list)
    error: str | None = None
    skipped: list[int] = field(default_factory=list)  # passed over below the end: `no_record` or `missing`, by the
    # partition's log start offset (the reader sorts them once the read is done)


class QueueReader:
    """Reads given offsets of one queue partition; contiguous offsets come in one pass."""

    def __init__(self, config: TrackerConfig) -> None:
        self._topic = config.kmq.queue_topic
        self._timeout_s = config.read_timeout_ms / 1000
        # group.id is mandatory for a librdkafka consumer; this one never subscribes nor commits, so never joins it.
        settings = consumer_settings(
            config.kmq, f"{config.group_id}__reader", enable_partition_eof=True, auto_offset_reset="earliest"
        )
        self._consumer = Consumer({**settings, **READER_FETCH, **_READ_AHEAD})

    def read(self, partition: int, offsets: Sequence[int]) -> ReadResult:
        """The records at `offsets` of `partition`. The partition is unassigned after: nothing is fetched between
        reads (an assigned partition would be fetched ahead up to the read-ahead bound, all the time)."""
        try:
            return self._read(partition, offsets)
        finally:
            try:
                self._consumer.unassign()
            except KafkaException as e:
                _log.debug("unassigning %s[%d] from the queue reader failed: %s", self._topic, partition, e)

    def _read(self, partition: int, offsets: Sequence[int]) -> ReadResult:
        result = ReadResult()
        deadline = time.monotonic() + self._timeout_s
        wanted = sorted(set(offsets))
        first = bisect_left(wanted, 0)
        self._nonexistent(partition, wanted[:first], result)  # negative: no message has them
        # Offsets below the end last seen exist; reading them refreshes the end the others are checked against.
        seen = bisect_left(wanted, self._cached_end(partition), lo=first)
        found_before = len(result.found)
        self._read_runs(partition, wanted[first:seen], result, deadline)
        fresh = len(result.found) > found_before
        self._read_runs(partition, self._existing(partition, wanted[seen:], result, deadline, fresh), result, deadline)
        self._sort_skipped(partition, result)
        return result

    def _sort_skipped(self, partition: int, result: ReadResult) -> None:
        """Offsets passed over below the partition's end are no record when at or above its log start (a
        read_committed fetch from them returned a later record, or the end: a transaction marker or an aborted
        record is there) and missing below it (retention removed them). The log start is asked of the leader now;
        without an answer they are left unread, for the next pass."""
        skipped, result.skipped = result.skipped, []
        if not skipped:
            return
        try:
            low, _ = self._consumer.get_watermark_offsets(
                TopicPartition(self._topic, partition), timeout=self._timeout_s, cached=False
            )
        except KafkaException as e:
            result.unread.extend(skipped)
            result.error = result.error or f"the log start offset: {e.args[0] if e.args else e}"
            return
        for offset in skipped:
            (result.no_record if offset >= low else result.missing).append(offset)

    def warm_up(self) -> None:
        """Connect, and learn the queue's partition leaders (raises KafkaException when no broker answers)."""
        self.partitions()

    def partitions(self) -> set[int]:
        """The queue's partitions, asked of the cluster now: this also refreshes what the consumer knows of them (a
        partition added since its last metadata refresh cannot be read before; raises KafkaException when no
        broker answers)."""
        topic = self._consumer.list_topics(self._topic, timeout=self._timeout_s).topics.get(self._topic)
        return set(topic.partitions) if topic is not None and topic.error is None else set()

    def close(self) -> None:
        self._consumer.close()

    def _read_runs(self, partition: int, wanted: list[int], result: ReadResult, deadline: float) -> None:
        for run in _runs(wanted):
            if result.error is not None or time.monotonic() >= deadline:
                result.unread.extend(run)
                continue
            self._read_run(partition, run, result, deadline)

    def _existing(
        self, partition: int, wanted: list[int], result: ReadResult, deadline: float, fresh: bool
    ) -> list[int]:
        """`wanted` (at or past the end last seen) without the offsets no message has, which go to
        `result.missing`: those at or past the partition's end (a START names a message a client has read, so one
        below the end then and ever since). The end is the high watermark of a fetch response: of this read's when
        it found something (`fresh`), else of a fetch made for it. A fetch past the end is never waited for (some
        brokers answer it with nothing until the timeout)."""
        if not wanted:
            return wanted
        end = self._cached_end(partition) if fresh else self._fetch_end(partition, deadline)
        cut = bisect_left(wanted, end) if end is not None else len(wanted)
        self._nonexistent(partition, wanted[cut:], result)
        return wanted[:cut]

    def _nonexistent(self, partition: int, offsets: list[int], result: ReadResult) -> None:
        if offsets:
            _log.warning(
                "START markers name offsets no message of %s[%d] has (negative, or past its end): %s",
                self._topic,
                partition,
                offsets if len(offsets) <= 10 else f"{offsets[:10]} and {len(offsets) - 10} more",
            )
            result.missing.extend(offsets)

    def _cached_end(self, partition: int) -> int:
        """The high watermark of the last fetch response from this partition (negative when none came yet)."""
        _, high = self._consumer.get_watermark_offsets(TopicPartition(self._topic, partition), cached=True)
        return int(high)

    def _fetch_end(self, partition: int, deadline: float) -> int | None:
        return fetch_end(self._consumer, TopicPartition(self._topic, partition), self._cached_end(partition), deadline)

    def _read_run(self, partition: int, run: list[int], result: ReadResult, deadline: float) -> None:
        cursor = _Cursor(run, result)
        try:
            self._consumer.assign([TopicPartition(self._topic, partition, run[0])])
            while not cursor.finished and time.monotonic() < deadline:
                for message in fetch(self._consumer, _BATCH, min(0.1, max(0.0, deadline - time.monotonic()))):
                    cursor.take(message)
        except KafkaException as e:
            result.error = str(e.args[0] if e.args else e)
        result.unread.extend(cursor.remaining())


def fetch_end(consumer: Consumer, partition: TopicPartition, near: int, deadline: float) -> int | None:
    """The partition's end, from the response to a fetch at an offset that exists (just below `near`, an end seen
    before, or the start: out of range resets to the earliest); None when no answer came by `deadline` (monotonic).
    `consumer` reads outside any group, with partition EOF events, and is left assigned to `partition`."""
    try:
        consumer.assign([TopicPartition(partition.topic, partition.partition, max(0, near - 1))])
        while time.monotonic() < deadline:
            for message in fetch(consumer, 1, min(0.1, max(0.0, deadline - time.monotonic()))):
                error = message.error()
                if error is None or error.code() == KafkaError._PARTITION_EOF:
                    # updated from the response that brought the message: a fresh assignment drops what came before
                    return int(consumer.get_watermark_offsets(partition, cached=True)[1])
                if (message.topic(), message.partition()) == (partition.topic, partition.partition):
                    return None
    except KafkaException:
        return None
    return None


class EndProbe:
    """Asks the end of a markers partition now, by a fetch (the tracker's lag guard, kmq_tracker.partition): the
    high watermark the markers consumer caches is only as fresh as its last fetch response."""

    def __init__(self, config: TrackerConfig) -> None:
        self._topic = config.kmq.markers_topic
        self._timeout_s = config.read_timeout_ms / 1000
        settings = consumer_settings(
            config.kmq,
            f"{config.group_id}__end-probe",
            enable_partition_eof=True,
            isolation_level=config.isolation_level,
            auto_offset_reset="earliest",
        )
        self._consumer = Consumer({**settings, **READER_FETCH, **_PROBE})

    def end(self, partition: int, near: int) -> int | None:
        """The end of markers partition `partition` as a fetch sent now finds it (`near`: an offset close to it);
        None when its leader did not answer within the read timeout."""
        deadline = time.monotonic() + self._timeout_s
        try:
            return fetch_end(self._consumer, TopicPartition(self._topic, partition), near, deadline)
        finally:
            self._consumer.unassign()  # no fetching between probes

    def warm_up(self) -> None:
        """Connect, and learn the markers partitions' leaders (raises KafkaException when no broker answers)."""
        self._consumer.list_topics(self._topic, timeout=self._timeout_s)

    def close(self) -> None:
        self._consumer.close()


class _Cursor:
    """Walks a sorted run of wanted offsets along the messages read from its first offset on."""

    def __init__(self, run: list[int], result: ReadResult) -> None:
        self._run = run
        self._next = 0
        self._result = result

    @property
    def finished(self) -> bool:
        return self._next >= len(self._run) or self._result.error is not None

    def remaining(self) -> list[int]:
        return self._run[self._next :]

    def take(self, message: KafkaMessage) -> None:
        if self.finished:
            return
        error = message.error()
        if error is not None:
            self._take_error(error, message)
            return
        offset = message.offset() or 0
        if offset < self._run[0]:
            # The first offset was out of range and the consumer reset to the log start: the rest is past the end.
            self._skip_to(self._run[-1] + 1, self._result.missing)
            return
        self._skip_to(offset, self._result.skipped)
        if self._next < len(self._run) and self._run[self._next] == offset:
            self._result.found.append(_record(message))
            self._next += 1

    def _take_error(self, error: KafkaError, message: KafkaMessage) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            # The end is the EOF's offset: below it a wanted offset held no record, at or past it none exists.
            self._skip_to(message.offset() or 0, self._result.skipped)
            self._skip_to(self._run[-1] + 1, self._result.missing)
        else:
            self._result.error = error.str()  # the rest of the run is retried after a backoff

    def _skip_to(self, offset: int, into: list[int]) -> None:
        """Wanted offsets below `offset` hold no record to read: they go `into` the list that says why."""
        while self._next < len(self._run) and self._run[self._next] < offset:
            into.append(self._run[self._next])
            self._next += 1


def _runs(offsets: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for offset in offsets:
        if runs and offset - runs[-1][-1] <= MAX_GAP:
            runs[-1].append(offset)
        else:
            runs.append([offset])
    return runs


def _record(message: KafkaMessage) -> QueueRecord:
    kind, timestamp_ms = message.timestamp()
    return QueueRecord(
        offset=message.offset() or 0,
        key=message.key(),
        value=message.value(),
        headers=from_kafka(message.headers()),
        timestamp_ms=0 if kind == TIMESTAMP_NOT_AVAILABLE else timestamp_ms,
    )
