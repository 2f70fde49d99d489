"""The driver's view of the queue: where the kmq group stands, where each partition ends, and committing progress.

Ends come from the high watermark of fetch responses (a consumer parked at the end of each partition), not from
ListOffsets "latest", which not every broker answers correctly. Partitions added to the queue while a query runs
(`kmq topics grow`) are found within `PARTITION_CHECK_S` and read from their beginning.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from kmq.admin import check_topics
from kmq.config import KmqConfig
from kmq.errors import CommitError
from kmq.kafka import SecurityWatch, consumer_settings

_log = logging.getLogger(__name__)
# How often `ends()` asks for the queue's partition count: a metadata request can wait behind the parked consumer's
# long-poll fetch on the same connection (fetch.wait.max.ms, 100 ms), so not at every trigger.
PARTITION_CHECK_S = 5.0
_FIRST_FETCH_S = 10.0
_FIRST_FETCH_POLL_S = 0.02


class QueuePositions:
    """A driver-side consumer (never subscribed, so it never joins the group) for offsets, ends and commits."""

    def __init__(self, config: KmqConfig, partition_check_s: float = PARTITION_CHECK_S) -> None:
        self.config = config
        self._partition_check_s = partition_check_s
        self._next_partition_check = time.monotonic() + partition_check_s
        # The topics checked through this consumer, not a new admin client and its connection (~50 ms of every
        # query's start); its error_cb fails a refused login at once, as check_topics' own client would.
        watch = SecurityWatch()
        settings = consumer_settings(config, config.group_id, fetch_wait_max_ms=100)
        self._consumer = Consumer({**settings, "error_cb": watch})
        try:
            self.partitions = check_topics(config, admin=self._consumer, watch=watch)
        except BaseException:
            self._consumer.close()
            raise
        self._parts = [TopicPartition(config.queue_topic, p, OFFSET_END) for p in range(self.partitions)]
        # Leaders known before the assignment: else librdkafka parks the END lookup on a ~500 ms retry timer.
        self._consumer.list_topics(config.queue_topic, timeout=config.metadata_timeout_ms / 1000)
        self._assigned = False
        self._ends: dict[int, int] = {}
        self._parked: dict[int, int] = {}  # where each partition was last sought to

    def committed(self) -> dict[int, int]:
        """Where the kmq group stands: its committed offset, else the partition's first offset. Asked before the
        consumer is parked: a parked consumer's fetch waits up to fetch.wait.max.ms at the end of the log, and each
        offset look-up on the same connection waited behind it (~100 ms a partition, 0.4 s of every query start)."""
        tps = [TopicPartition(self.config.queue_topic, p) for p in range(self.partitions)]
        found = self._committed(tps)
        positions = {tp.partition: tp.offset if tp.offset >= 0 else self._low(tp.partition) for tp in found}
        self._park(positions)  # its first fetch response (the ends) arrives while Spark plans the first micro-batch
        return positions

    def ends(self) -> dict[int, int]:
        """The end of every partition, as the newest fetch responses report it (never going back). Only the first
        call waits (for a first fetch response of each partition); later ones take what has arrived since, at once:
        the parked consumer keeps fetching in the background, and Spark asks again at its next trigger."""
        self._park()
        self._follow_added_partitions()
        deadline = time.monotonic() + _FIRST_FETCH_S
        while True:
            self._drain(0 if len(self._ends) == self.partitions else _FIRST_FETCH_POLL_S)
            for tp in self._parts:
                high = self._consumer.get_watermark_offsets(tp, cached=True)
                if high is not None and high[1] >= 0:
                    self._ends[tp.partition] = max(self._ends.get(tp.partition, 0), high[1])
            if len(self._ends) == self.partitions or time.monotonic() > deadline:
                return {p: self._ends.get(p, 0) for p in range(self.partitions)}

    def _committed(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        """The group's offsets, waiting out a coordinator that is still being chosen (a new group, a restart)."""
        deadline = time.monotonic() + self.config.metadata_timeout_ms / 1000
        while True:
            try:
                found: list[TopicPartition] = self._consumer.committed(
                    tps, timeout=self.config.metadata_timeout_ms / 1000
                )
            except KafkaException as e:
                if not _coordinator_busy(e) or time.monotonic() > deadline:
                    raise
                _log.info("committed offsets of %s not available yet: %s", self.config.group_id, e)
                time.sleep(0.2)
            else:
                return found

    def commit(self, positions: dict[int, int]) -> None:
        """Commit the kmq group's offsets (the rest of kmq then sees the stream's progress)."""
        tps = [TopicPartition(self.config.queue_topic, p, o) for p, o in positions.items() if o > 0]
        if not tps:
            return
        try:
            self._consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as e:
            if not _coordinator_busy(e):
                raise CommitError(f"committing {self.config.group_id} offsets on {self.config.queue_topic}: {e}") from e
            # Spark's checkpoint is the source of truth: the group's offsets only show progress, the next batch retries.
            _log.warning("committing %s offsets on %s: %s", self.config.group_id, self.config.queue_topic, e)

    def _park(self, at: dict[int, int] | None = None) -> None:
        """Assign the consumer, once: from then on it fetches in the background. At `at` (where the group stands)
        when known, else at the end of every partition. A fetch from where the group stands answers at once when
        there is something to read (its response carries the high watermark; `_drain` then parks the consumer at
        it), where a fetch at the end waits fetch.wait.max.ms for new records, after a ListOffsets for the end:
        a query that starts with a backlog had its first `ends()` take ~0.22 s instead of ~0.03 s."""
        if not self._assigned:
            start = at or {}
            topic = self.config.queue_topic
            self._consumer.assign([TopicPartition(topic, p, start.get(p, OFFSET_END)) for p in range(self.partitions)])
            self._assigned = True

    def close(self) -> None:
        self._consumer.close()

    def _follow_added_partitions(self) -> None:
        """Every `partition_check_s`: partitions added to the queue since are assigned from their beginning (a new
        partition's first offset is 0, and micro-batches read it from there: `offsets.split`)."""
        if time.monotonic() < self._next_partition_check:
            return
        self._next_partition_check = time.monotonic() + self._partition_check_s
        topic = self.config.queue_topic
        try:
            found = self._consumer.list_topics(topic, timeout=self.config.metadata_timeout_ms / 1000).topics.get(topic)
        except KafkaException as e:  # the next check asks again
            _log.warning("looking for partitions added to %s: %s", topic, e)
            return
        count = len(found.partitions) if found is not None and found.error is None else 0
        if count <= self.partitions:
            return
        added = range(self.partitions, count)
        self._consumer.incremental_assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in added])
        self._parts += [TopicPartition(topic, p, OFFSET_END) for p in added]
        _log.info("%s has %d partitions now (was %d): the stream reads the new ones too", topic, count, self.partitions)
        self.partitions = count

    def _drain(self, timeout_s: float) -> None:
        """Discard what the parked consumer fetched and park it again at the newest end it saw."""
        records = self._consumer.consume(num_messages=10_000, timeout=timeout_s)
        for record in records:
            if record.error() is None:
                partition, offset = record.partition() or 0, record.offset() or 0
                self._ends[partition] = max(self._ends.get(partition, 0), offset + 1)
        for partition, end in self._ends.items():
            if self._parked.get(partition, -1) >= end:
                continue  # parked there already: a seek would only restart its fetch
            try:
                self._consumer.seek(TopicPartition(self.config.queue_topic, partition, end))
            except KafkaException as e:  # not yet fetching: the next call seeks it
                _log.debug("seek %s[%d]: %s", self.config.queue_topic, partition, e)
            else:
                self._parked[partition] = end

    def _low(self, partition: int) -> int:
        tp = TopicPartition(self.config.queue_topic, partition)
        low, _ = self._consumer.get_watermark_offsets(tp, timeout=self.config.metadata_timeout_ms / 1000)
        return max(0, int(low))


_COORDINATOR_BUSY = frozenset(
    {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
     KafkaError._TIMED_OUT, KafkaError.REBALANCE_IN_PROGRESS}
)  # fmt: skip


def _coordinator_busy(error: KafkaException) -> bool:
    """A group coordinator being chosen or loaded (a new group, a broker restart): worth asking again."""
    err = error.args[0] if error.args else None
    return isinstance(err, KafkaError) and (err.code() in _COORDINATOR_BUSY or err.retriable())
