"""The driver's view of the queue: where the kmq group stands, where each partition ends, and committing progress.

Ends come from the high watermark of fetch responses (a consumer parked at the end of each partition), not from
ListOffsets "latest", which not every broker answers correctly.

Commits are asynchronous. Spark's checkpoint is the source of truth on restart; the group's offsets only show the
stream's progress to the rest of kmq (tracker lag, metrics, other consumers). A synchronous OffsetCommit held every
micro-batch up for a round trip to the group coordinator (60-260 ms on 2 loaded cores, docs/benchmarks.md); now a
failed commit is logged, not raised, and the next micro-batch's commit (a later position) supersedes it. `close()`
waits, bounded, for the commits still in flight.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from kmq.admin import check_topics
from kmq.config import KmqConfig
from kmq.kafka import consumer_settings

_log = logging.getLogger(__name__)
_FIRST_FETCH_S = 10.0
_FIRST_FETCH_POLL_S = 0.02
_CLOSE_WAIT_S = 5.0  # for the commits still in flight when the query stops


class QueuePositions:
    """A driver-side consumer (never subscribed, so it never joins the group) for offsets, ends and commits."""

    def __init__(self, config: KmqConfig) -> None:
        self.config = config
        self.partitions = check_topics(config)
        settings = consumer_settings(config, config.group_id, fetch_wait_max_ms=100)
        self._consumer = Consumer({**settings, "on_commit": self._committed_cb})
        self._in_flight = 0  # asynchronous commits not answered yet (their callbacks run in consume/poll)
        self.failed_commits = 0
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
        self._park()  # its first fetch response (the ends) arrives while Spark plans the first micro-batch
        return positions

    def ends(self) -> dict[int, int]:
        """The end of every partition, as the newest fetch responses report it (never going back). Only the first
        call waits (for a first fetch response of each partition); later ones take what has arrived since, at once:
        the parked consumer keeps fetching in the background, and Spark asks again at its next trigger."""
        self._park()
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
        """Commit the kmq group's offsets without waiting (see the module's docstring): the answer arrives in a
        later `ends()` or `close()`, a failure is logged there."""
        tps = [TopicPartition(self.config.queue_topic, p, o) for p, o in positions.items() if o > 0]
        if not tps:
            return
        try:
            self._consumer.commit(offsets=tps, asynchronous=True)
        except KafkaException as e:  # refused before it was sent (e.g. the consumer is closing): the same contract
            self._failed(e.args[0] if e.args else e)
        else:
            self._in_flight += 1

    def _committed_cb(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        self._in_flight = max(0, self._in_flight - 1)
        failed = [tp for tp in partitions if tp.error is not None]
        if error is not None or failed:
            self._failed(error or ", ".join(f"[{tp.partition}] {tp.error}" for tp in failed))

    def _failed(self, error: object) -> None:
        self.failed_commits += 1
        _log.warning(
            "committing %s offsets on %s failed (the query goes on: Spark's checkpoint is the source of truth, the "
            "next micro-batch commits again): %s", self.config.group_id, self.config.queue_topic, error,
        )  # fmt: skip

    def wait_commits(self, timeout_s: float) -> bool:
        """Serve the commits' answers until none is in flight or `timeout_s` passed; True when none is left."""
        deadline = time.monotonic() + timeout_s
        while self._in_flight and time.monotonic() < deadline:
            self._drain(min(0.05, max(0.0, deadline - time.monotonic())))
        return not self._in_flight

    def _park(self) -> None:
        """Assign the consumer at the end of every partition, once: from then on it fetches in the background."""
        if not self._assigned:
            self._consumer.assign(self._parts)
            self._assigned = True

    def close(self) -> None:
        if not self.wait_commits(_CLOSE_WAIT_S):
            _log.warning("%d commits of %s not answered in %.0fs at close", self._in_flight, self.config.group_id,
                         _CLOSE_WAIT_S)  # fmt: skip
        self._consumer.close()

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
