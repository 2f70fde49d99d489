"""The driver's view of the kmq group: where it stands (a new stream starts there, the audit counts from there), and
committing a stream's progress to it."""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kmq.admin import check_topics
from kmq.config import KmqConfig
from kmq.errors import CommitError
from kmq.kafka import SecurityWatch, consumer_settings

_log = logging.getLogger(__name__)


class QueuePositions:
    """A driver-side consumer (never subscribed, so it never joins the group) for the group's offsets and commits."""

    def __init__(self, config: KmqConfig) -> None:
        self.config = config
        # The topics checked through this consumer, not a new admin client and its connection (~50 ms of every
        # query's start); its error_cb fails a refused login at once, as check_topics' own client would.
        watch = SecurityWatch()
        settings = consumer_settings(config, config.group_id)
        self._consumer = Consumer({**settings, "error_cb": watch, "on_commit": self._committed_async})
        self._commit_failure: KafkaError | None = None  # of an asynchronous commit, raised by check_commits
        self._unsettled: dict[int, int] | None = None  # the last asynchronous commit's positions
        try:
            self.partitions = check_topics(config, admin=self._consumer, watch=watch)
        except BaseException:
            self._consumer.close()
            raise

    def committed(self) -> dict[int, int]:
        """Where the kmq group stands: its committed offset, else the partition's first offset."""
        tps = [TopicPartition(self.config.queue_topic, p) for p in range(self.partitions)]
        found = self._committed(tps)
        return {tp.partition: tp.offset if tp.offset >= 0 else self.low(tp.partition) for tp in found}

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

    def commit(self, positions: dict[int, int], *, asynchronous: bool = False) -> None:
        """Commit the kmq group's offsets (the rest of kmq then sees the stream's progress). An asynchronous commit's
        outcome is checked by `check_commits` (and `close` makes it synchronously again)."""
        tps = [TopicPartition(self.config.queue_topic, p, o) for p, o in positions.items() if o > 0]
        if not tps:
            return
        self._unsettled = positions if asynchronous else None
        try:
            if asynchronous:
                self._consumer.commit(offsets=tps, asynchronous=True)
            else:
                self._consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as e:
            self._failed(e.args[0] if e.args else None, e)

    def check_commits(self) -> None:
        """Serve the asynchronous commits' outcomes; CommitError for one that failed other than by a busy
        coordinator."""
        self._consumer.poll(0)
        failure, self._commit_failure = self._commit_failure, None
        if failure is not None:
            self._failed(failure, KafkaException(failure))

    def _committed_async(self, error: KafkaError | None, _partitions: list[TopicPartition]) -> None:
        if error is not None:
            self._commit_failure = error

    def _failed(self, error: object, exception: KafkaException) -> None:
        if not _coordinator_busy(exception):
            raise CommitError(
                f"committing {self.config.group_id} offsets on {self.config.queue_topic}: {error}"
            ) from exception
        # Spark's checkpoint is the source of truth: the group's offsets only show progress, the next batch retries.
        _log.warning("committing %s offsets on %s: %s", self.config.group_id, self.config.queue_topic, error)

    def close(self) -> None:
        """Close the consumer; the last asynchronous commit is made again, synchronously, so it is done here."""
        try:
            if self._unsettled is not None:
                self.commit(self._unsettled)
        finally:
            self._consumer.close()

    def low(self, partition: int) -> int:
        """The partition's log start offset (its first offset retention kept)."""
        return max(0, self._watermarks(partition)[0])

    def high(self, partition: int) -> int:
        """The partition's end (high watermark)."""
        return max(0, self._watermarks(partition)[1])

    def _watermarks(self, partition: int) -> tuple[int, int]:
        tp = TopicPartition(self.config.queue_topic, partition)
        timeout_s = self.config.metadata_timeout_ms / 1000
        try:
            low, high = self._consumer.get_watermark_offsets(tp, timeout=timeout_s)
        except KafkaException as e:
            if not _unknown_partition(e):
                raise
            # A partition added since this consumer's last metadata refresh: learn it, then ask again.
            self._consumer.list_topics(self.config.queue_topic, timeout=timeout_s)
            low, high = self._consumer.get_watermark_offsets(tp, timeout=timeout_s)
        return int(low), int(high)


_COORDINATOR_BUSY = frozenset(
    {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
     KafkaError._TIMED_OUT, KafkaError.REBALANCE_IN_PROGRESS}
)  # fmt: skip


def _unknown_partition(error: KafkaException) -> bool:
    err = error.args[0] if error.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError._UNKNOWN_PARTITION


def _coordinator_busy(error: KafkaException) -> bool:
    """A group coordinator being chosen or loaded (a new group, a broker restart): worth asking again."""
    err = error.args[0] if error.args else None
    return isinstance(err, KafkaError) and (err.code() in _COORDINATOR_BUSY or err.retriable())
