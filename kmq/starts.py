"""How a received batch's STARTs are written and its offsets committed (PROTOCOL.md, "Client flow", steps 2-3).

One interface, three modes, chosen once when the client is made (`start_mode`):

- `SyncStarts`: STARTs durable (acks=all), then the offsets committed, then the messages handed over;
- `PipelinedStarts` (the default): the STARTs queued and the messages handed over at once; a `StartPipeline` commits
  once they are acknowledged, and its gate holds each message's later markers until its START is acknowledged;
- `TransactionalStarts`: the STARTs and the offset commit in one transaction.

A batch whose STARTs or commit failed is rewound (read again) by the `rewind` the client gives, and the error raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kmq._transactional import TransactionalStarts as _Transactions
from kmq.config import KmqConfig
from kmq.consumer_turns import ConsumerTurns
from kmq.end_gate import EndGate
from kmq.errors import CommitError, DeliveryError, KmqError, MarkerWriteError
from kmq.marker_writer import Offsets, StartWriter, first_of
from kmq.start_pipeline import StartPipeline

_log = logging.getLogger(__name__)
Rewind = Callable[[Offsets], None]


class Starts(Protocol):
    """Steps 2-3 of one client's batches. `gate` is the gate later markers pass (None: no START is in flight when
    the messages are handed over)."""

    gate: EndGate | None

    @property
    def failed_commits(self) -> int:
        """Asynchronous offset commits that failed (pipelined)."""

    @property
    def fatal_error(self) -> str | None:
        """Why no batch can begin any more (a transactional producer that cannot be replaced), or None."""

    def check(self) -> None:
        """Before a batch: raise (after rewinding) what an earlier batch's STARTs left."""

    def begin(self, offsets: Offsets, redeliver_after_ms: int) -> None:
        """2-3 for a received batch; raises (after rewinding it) when it must be read again."""

    def wait_started(self, timeout_s: float) -> None:
        """Until every batch handed over has its STARTs acknowledged; MarkerWriteError if one failed or timed out."""

    def settle(self, timeout_s: float) -> None:
        """Rule 4 (flush, close): wait, bounded, for the STARTs in flight; commit what they allow."""

    def revoked(self, partitions: set[int], timeout_s: float) -> None:
        """The group takes these partitions away: rule 4 for them, before the next owner reads them."""

    def on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The consumer's `on_commit` (asynchronous commits)."""

    def flush(self, timeout_s: float) -> int:
        """Wait for the START records in flight; how many are still unacknowledged."""

    def close(self, timeout_s: float) -> None:
        """Stop what this mode runs (after `settle`)."""


class _StartsAtOnce:
    """What the two modes whose STARTs are durable before `begin` returns share: nothing in flight to wait for,
    settle, hand back at a revocation or close, and no asynchronous commits to hear of."""

    gate: EndGate | None = None
    failed_commits = 0

    def check(self) -> None:
        pass

    def wait_started(self, timeout_s: float) -> None:
        pass

    def settle(self, timeout_s: float) -> None:
        pass

    def revoked(self, partitions: set[int], timeout_s: float) -> None:
        pass

    def on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        pass

    def close(self, timeout_s: float) -> None:
        pass


class SyncStarts(_StartsAtOnce):
    """STARTs written and acknowledged, then the offsets committed synchronously."""

    fatal_error: str | None = None

    def __init__(
        self, config: KmqConfig, consumer: Consumer, turns: ConsumerTurns, rewind: Rewind, timeout_s: float
    ) -> None:
        self.config = config
        self._consumer = consumer
        self._turns = turns
        self._rewind = rewind
        self._timeout_s = timeout_s
        self._writer = StartWriter(config)

    def begin(self, offsets: Offsets, redeliver_after_ms: int) -> None:
        try:  # 2. STARTs, acks=all.
            self._writer.wait(self._writer.produce(offsets, redeliver_after_ms), self._timeout_s)
        except DeliveryError as e:
            self._rewind(offsets)
            raise MarkerWriteError(self.config.markers_topic, *first_of(offsets), str(e)) from e
        self._commit(offsets)  # 3. Commit the batch's offsets.

    def flush(self, timeout_s: float) -> int:
        return self._writer.flush(timeout_s)

    def _commit(self, offsets: Offsets) -> None:
        topic = self.config.queue_topic
        try:
            with self._turns.call():
                committed = self._consumer.commit(offsets=next_offsets(topic, offsets), asynchronous=False)
        except KafkaException as e:
            # The STARTs are written: the tracker redelivers this batch if nobody acknowledges it.
            self._rewind(offsets)
            raise CommitError(f"committing {topic} offsets failed: {e}") from e
        if failed := _commit_errors(committed):  # a per-partition error is a failed commit too: read again
            self._rewind(offsets)
            raise CommitError(f"committing {topic} offsets failed for {failed}")


class TransactionalStarts(_StartsAtOnce):
    """STARTs and the offset commit in one transaction."""

    def __init__(self, config: KmqConfig, consumer: Consumer, rewind: Rewind, timeout_s: float) -> None:
        self.config = config
        self.transactions = _Transactions(config, consumer)
        self._rewind = rewind
        self._timeout_s = timeout_s

    @property
    def fatal_error(self) -> str | None:
        return self.transactions.fatal_error

    def begin(self, offsets: Offsets, redeliver_after_ms: int) -> None:
        commit = next_offsets(self.config.queue_topic, offsets)
        try:  # 2+3. STARTs and the offset commit in one transaction.
            self.transactions.starts_and_commit(offsets, commit, redeliver_after_ms, self._timeout_s)
        except KmqError:
            self._rewind(offsets)
            raise

    def flush(self, timeout_s: float) -> int:
        return self.transactions.flush(timeout_s)


class PipelinedStarts:
    """STARTs queued, messages handed over at once; commits follow the acknowledgements (kmq.start_pipeline)."""

    fatal_error: str | None = None

    def __init__(self, config: KmqConfig, consumer: Consumer, turns: ConsumerTurns, rewind: Rewind) -> None:
        self.config = config
        self.pipeline = StartPipeline(config, consumer, turns=turns)
        self.gate: EndGate | None = self.pipeline.gate
        self._rewind = rewind

    @property
    def failed_commits(self) -> int:
        return self.pipeline.failed_commits

    def check(self) -> None:
        """Rule 3: a batch whose START failed for good is delivered again, with every batch after it."""
        pipeline = self.pipeline
        if pipeline.crashed is not None:
            raise MarkerWriteError(
                self.config.markers_topic, -1, -1, f"a thread of the START pipeline died: {pipeline.crashed!r}"
            )
        failure = pipeline.take_failure()
        if failure is not None:
            error, offsets = failure
            self._rewind(offsets)
            raise MarkerWriteError(self.config.markers_topic, *first_of(offsets), str(error)) from error

    def begin(self, offsets: Offsets, redeliver_after_ms: int) -> None:
        # 2. STARTs queued; 3. committed by the pipeline once they are acknowledged (PROTOCOL.md's four rules).
        try:
            self.pipeline.send(offsets, redeliver_after_ms)
        except DeliveryError as e:
            self._rewind(offsets)
            raise MarkerWriteError(self.config.markers_topic, *first_of(offsets), str(e)) from e

    def wait_started(self, timeout_s: float) -> None:
        settled = self.pipeline.drain(timeout_s)
        self.check()
        in_flight = self.pipeline.first_in_flight()
        if not settled and in_flight is not None:
            raise MarkerWriteError(self.config.markers_topic, *in_flight, f"not acknowledged within {timeout_s}s")

    def settle(self, timeout_s: float) -> None:
        """Rule 4: wait, bounded, for the STARTs in flight; commit what they allow, synchronously."""
        if not self.pipeline.drain(timeout_s):
            _log.warning(
                "STARTs of %s still in flight after %.1fs: their offsets stay uncommitted",
                self.config.queue_topic,
                timeout_s,
            )
        self.pipeline.commit_now()

    def revoked(self, partitions: set[int], timeout_s: float) -> None:
        if not self.pipeline.drain(timeout_s):
            _log.warning(
                "STARTs of %s still in flight at revocation: read again by the next owner", self.config.queue_topic
            )
        self.pipeline.commit_now(partitions)
        self.pipeline.forget(partitions)

    def on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        self.pipeline.on_commit(error, partitions)

    def flush(self, timeout_s: float) -> int:
        return 0  # (its records are waited for by `settle`, and flushed by `close`)

    def close(self, timeout_s: float) -> None:
        self.pipeline.close(timeout_s)


def start_mode(config: KmqConfig, consumer: Consumer, turns: ConsumerTurns, rewind: Rewind, timeout_s: float) -> Starts:
    """The mode `config` asks for: transactional, else pipelined (the default), else synchronous."""
    if config.transactional:
        return TransactionalStarts(config, consumer, rewind, timeout_s)
    if config.pipelined:
        return PipelinedStarts(config, consumer, turns, rewind)
    return SyncStarts(config, consumer, turns, rewind, timeout_s)


def _commit_errors(committed: list[TopicPartition] | None) -> str:
    """The partitions whose commit failed, with the broker's error ("" when none did)."""
    errors = [(tp.partition, tp.error) for tp in committed or ()]
    return ", ".join(f"partition {partition} ({error.str()})" for partition, error in errors if error is not None)


def next_offsets(topic: str, offsets: Offsets) -> list[TopicPartition]:
    """The offsets to commit: one past the highest received, per partition."""
    return [TopicPartition(topic, partition, max(received) + 1) for partition, received in offsets.items()]
