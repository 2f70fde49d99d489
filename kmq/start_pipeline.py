"""Pipelined STARTs (PROTOCOL.md, "Client flow (one batch)": steps 2-4 overlap).

`receive()` queues a batch's STARTs and hands the messages over at once. The START producer's delivery reports
are served by a thread of the pipeline's own, which waits in librdkafka's poll (no busy loop); the reports drive the
rest:

- **One report per partition per batch moves it.** The producer is idempotent, so librdkafka delivers a partition's
  records, and reports them, in the order produced: the report of a partition's last START comes after the reports of
  every START before it. Only that last one runs the batch accounting (`_report`); the others run `_seen`, which does
  nothing for a success and marks the batch failed for a failure. Every failure is seen: an idempotent producer can
  fail one record and deliver the next (a permanent error, a timeout in its queue: librdkafka's "gap-less" guarantee
  is off), so a success of the last START alone proves nothing about the others. A failure reported after its
  partition's last START was already accounted (out of order, which librdkafka does not do) stops the client.

- **No commit before its STARTs.** Batches wait in a queue in the order received. Once the batch at its head has
  every START acknowledged, its offsets join the next commit, which a commit thread sends asynchronously at once,
  one commit at a time: never the report thread, which a commit could hold up.
- **No END before its START.** Each batch opens an `EndGate` span per partition; markers for its messages wait there
  until that partition's STARTs are acknowledged.
- **A failed START rewinds.** A batch with a failed START stops the queue: nothing at or past it is committed. The
  next `receive()` takes it and every batch after it, seeks their partitions back to their first offsets and
  raises `MarkerWriteError`.
- **Revocation and close.** `drain` waits, bounded, until no START is in flight; `commit_now` then commits what the
  acknowledged batches allow, synchronously.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Collection, Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import Message as KafkaMessage

from kmq.config import KmqConfig
from kmq.consumer_turns import ConsumerTurns
from kmq.end_gate import EndGate, Span
from kmq.errors import DeliveryError
from kmq.kafka import delivery_detail, producer_settings
from kmq.marker_writer import Offsets, StartWriter

_log = logging.getLogger(__name__)
_POLL_S = 0.1  # how often the report thread looks whether it should stop (it wakes at once for a report)
_SEND_WAIT_S = 1.0  # how long a synchronous commit waits for the commit thread's send in progress


class _Batch:
    """One received batch: its offsets, and per partition the START records not reported yet."""

    __slots__ = ("error", "failed", "left", "next_offsets", "offsets", "open", "spans")

    def __init__(self, offsets: Offsets) -> None:
        self.offsets = offsets
        # A partition's offsets come in the order consumed, ascending: the last is the highest.
        self.next_offsets = {partition: received[-1] + 1 for partition, received in offsets.items()}
        self.left: dict[int, int] = {}
        self.spans: dict[int, Span] = {}
        self.open = len(offsets)  # partitions with a START not reported yet
        self.error: DeliveryError | None = None
        self.failed: set[int] = set()  # partitions with a failed START


class StartPipeline:
    """The STARTs in flight of one client, its asynchronous commits, and the gate its markers pass."""

    def __init__(
        self,
        config: KmqConfig,
        consumer: Consumer,
        producer: Producer | None = None,
        turns: ConsumerTurns | None = None,
    ) -> None:
        self.config = config
        self.gate = EndGate()
        self._consumer = consumer
        # The consumer's calls from this pipeline's threads take turns with the receiving thread's consume().
        self._turns = turns if turns is not None else ConsumerTurns()
        linger_ms = 0 if config.marker_format == "batch" else 1  # (see StartWriter)
        if producer is None:  # every record reported: a success is what moves the commit
            producer = Producer(producer_settings(config, linger_ms=linger_ms))
        self._writer = StartWriter(config, producer)
        self._pending: deque[_Batch] = deque()
        self._changed = threading.Condition()
        self._acked: dict[int, int] = {}  # partition -> next offset every START below which is acknowledged
        self._to_commit: dict[int, int] = {}  # the part of `_acked` not sent yet
        self.failed_commits = 0
        self.crashed: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kmq-start-reports", daemon=True)
        self._thread.start()
        # Commits have a thread of their own: an asynchronous commit can wait behind the receiving thread's
        # consume() (1.5 s measured), and the report thread must never wait (the ENDs held back wait on it).
        self._sending = threading.Lock()  # one commit at a time, in order
        self._committer = threading.Thread(target=self._commit_loop, name="kmq-start-commits", daemon=True)
        self._committer.start()

    @property
    def producer(self) -> Producer:
        return self._writer.producer

    def send(self, offsets: Offsets, redeliver_after_ms: int) -> None:
        """2. Queue the batch's STARTs (not waiting). DeliveryError when librdkafka refuses one at once: the batch is
        then out of the queue, its spans failed, and nothing was handed over."""
        batch = _Batch(offsets)
        records = {p: self._writer.records(p, received, redeliver_after_ms) for p, received in offsets.items()}
        with self._changed:  # before the first produce: a report may come at once
            for partition in records:
                batch.left[partition] = 1  # the report of its last START (see the module's docstring)
                received = offsets[partition]
                batch.spans[partition] = self.gate.open(partition, received[0], received[-1])
            self._pending.append(batch)
        seen = functools.partial(self._seen, batch)
        try:
            for partition, partition_records in records.items():
                partition_records[-1]["callback"] = functools.partial(self._report, batch)
                self._writer.produce_records(partition, partition_records, seen)
        except DeliveryError:
            with self._changed:
                self._pending.remove(batch)
                batch.error = batch.error or DeliveryError(self.config.markers_topic, None, "refused")
                self._changed.notify_all()
            for span in batch.spans.values():
                self.gate.failed(span)
            raise

    def take_failure(self) -> tuple[DeliveryError, dict[int, list[int]]] | None:
        """The first failed batch once every batch before it is committed, with the offsets of it and of every
        batch after it (to rewind: they are delivered again); None when no START failed."""
        with self._changed:
            if not self._pending or self._pending[0].error is None:
                return None
            error = self._pending[0].error
            dropped = list(self._pending)
            self._pending.clear()
        rewind: dict[int, list[int]] = {}
        for batch in dropped:
            for partition, received in batch.offsets.items():
                rewind.setdefault(partition, []).append(min(received))
        return error, {partition: [min(firsts)] for partition, firsts in rewind.items()}

    def drain(self, timeout_s: float) -> bool:
        """Wait until no START is in flight (or the first failed batch heads the queue); False at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self._settled():
                left = deadline - time.monotonic()
                if left <= 0 or self.crashed is not None:
                    return False
                self._changed.wait(left)
        return True

    def commit_now(self, partitions: Collection[int] | None = None) -> None:
        """Commit, synchronously, what the acknowledged batches allow (of `partitions`, or all).

        After the commit thread's send in progress, so that an older commit does not land after this one. Bounded:
        that send can wait behind a `consume()` that is running this very call (a revocation), and then this commit
        goes first; the older one landing after it only costs re-reads."""
        sending = self._sending.acquire(timeout=_SEND_WAIT_S)
        try:
            with self._changed:
                chosen = (
                    dict(self._acked)
                    if partitions is None
                    else {p: o for p, o in self._acked.items() if p in partitions}
                )
                for partition in chosen:
                    self._to_commit.pop(partition, None)
            self._commit(chosen, asynchronous=False)
        finally:
            if sending:
                self._sending.release()

    def forget(self, partitions: Collection[int]) -> None:
        """The group took these partitions away: no later commit of this client names them."""
        with self._changed:
            for partition in partitions:
                self._acked.pop(partition, None)
                self._to_commit.pop(partition, None)
                for batch in self._pending:
                    batch.next_offsets.pop(partition, None)
        dropped = self.gate.forget_failed(partitions)
        if dropped:
            _log.info("%d markers of STARTs that failed dropped with their partitions (read again)", dropped)

    def first_in_flight(self) -> tuple[int, int] | None:
        """(partition, offset) of the first message of the oldest batch not committed yet, or None."""
        with self._changed:
            if not self._pending:
                return None
            partition, offsets = next(iter(self._pending[0].offsets.items()))
            return partition, offsets[0]

    def close(self, timeout_s: float) -> None:
        """Stop the report thread (after `drain`); reports still due are served by this thread's flush."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        for thread in (self._thread, self._committer):
            if thread is not threading.current_thread():
                thread.join()
        remaining = self._writer.flush(timeout_s)
        if remaining:
            _log.warning("%d START markers of %s unacknowledged at close", remaining, self.config.queue_topic)

    def _settled(self) -> bool:
        return all(batch.open == 0 for batch in self._pending) or self._pending[0].error is not None

    def _serve(self) -> None:
        """The report thread: serve delivery reports (they move the batches, the gate and the commits)."""
        with self._fatal("START report"):
            producer = self._writer.producer
            while not self._stop.is_set():
                producer.poll(_POLL_S)

    def _commit_loop(self) -> None:
        """The commit thread: send each commit the acknowledged batches allow, as soon as they allow it."""
        with self._fatal("commit"):
            while True:
                with self._changed:
                    while not self._to_commit and not self._stop.is_set():
                        self._changed.wait(_POLL_S)
                    if self._stop.is_set():
                        return
                self._send_commit()

    @contextlib.contextmanager
    def _fatal(self, thread: str) -> Iterator[None]:
        """A thread of the pipeline that dies stops the client: the next `receive()` raises (never half alive)."""
        try:
            yield
        except BaseException as e:
            _log.exception("the %s thread of %s died: the client stops receiving", thread, self.config.queue_topic)
            with self._changed:
                self.crashed = e
                self._changed.notify_all()
            raise

    def _seen(self, batch: _Batch, error: KafkaError | None, message: KafkaMessage) -> None:
        """The delivery report of a START before its partition's last in the batch: a success costs nothing here."""
        if error is None:
            return
        partition = message.partition()
        assert partition is not None
        with self._changed:
            late = batch.left.get(partition, 0) == 0
            self._fail(batch, partition, error)
        if late:  # its partition was already accounted as acknowledged: the client cannot keep rule 3 any more
            raise DeliveryError(self.config.markers_topic, partition, "a START failed after a later one was reported")

    def _fail(self, batch: _Batch, partition: int, error: KafkaError) -> None:
        """Under the lock: a START of `partition` failed."""
        batch.failed.add(partition)
        if batch.error is None:
            topic = self.config.markers_topic
            batch.error = DeliveryError(topic, partition, delivery_detail(error, topic))

    def _report(self, batch: _Batch, error: KafkaError | None, message: KafkaMessage) -> None:
        """The delivery report of a partition's last START in the batch (every report before it was seen). Two
        threads serve reports: the report thread, and the receiving thread while the producer's local queue is full
        (`StartWriter._refused` polls to make room), so the batch's counters change under the lock: a decrement lost
        to a race left its batch open for ever (no commit, its ENDs held back, every message of it redelivered)."""
        partition = message.partition()
        assert partition is not None
        with self._changed:
            left = batch.left[partition] - 1
            batch.left[partition] = left
            if error is not None:
                self._fail(batch, partition, error)
            if left:
                return
            failed = partition in batch.failed
        # The last report of the partition (one thread sees `left` reach 0): its span opens, outside the lock (the
        # gate runs the markers it held back, which can take a while).
        span = batch.spans[partition]
        if failed:
            self.gate.failed(span)
        else:
            self.gate.acked(partition, span)
        with self._changed:
            batch.open -= 1
            self._advance()
            self._changed.notify_all()

    def _advance(self) -> None:
        """Under the lock: the acknowledged batches at the head of the queue join the next commit."""
        pending = self._pending
        while pending and pending[0].open == 0 and pending[0].error is None:
            done = pending.popleft()
            self._acked.update(done.next_offsets)
            self._to_commit.update(done.next_offsets)

    def _send_commit(self) -> None:
        """3. Send, asynchronously, the commit the acknowledged batches allow: the commit thread alone, so commits go
        out in order. Never the report thread: a commit there waited behind the consumer's `consume()` (measured:
        1.5 s), and every START report, so every END held back for its START, waited with it."""
        with self._sending:
            with self._changed:
                offsets, self._to_commit = self._to_commit, {}
            self._commit(offsets, asynchronous=True)

    def _commit(self, offsets: dict[int, int], asynchronous: bool) -> None:
        """3. Commit; a failure is counted and logged (the messages are read again: duplicates, never a loss)."""
        if not offsets:
            return
        topic = self.config.queue_topic
        partitions = [TopicPartition(topic, partition, offset) for partition, offset in offsets.items()]
        try:
            with self._turns.call():  # never behind a consume() of the receiving thread for more than a slice
                if asynchronous:
                    self._consumer.commit(offsets=partitions, asynchronous=True)
                    result: list[TopicPartition] = []
                else:
                    result = self._consumer.commit(offsets=partitions, asynchronous=False)
        except KafkaException as e:
            self.commit_failed(str(e.args[0].str() if e.args else e))
            return
        failed = [f"partition {tp.partition} ({tp.error.str()})" for tp in result if tp.error is not None]
        if failed:
            self.commit_failed(", ".join(failed))

    def on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The consumer's `on_commit`: an asynchronous commit's result."""
        if error is not None:
            if error.code() != KafkaError._NO_OFFSET:
                self.commit_failed(error.str())
            return
        failed = [f"partition {tp.partition} ({tp.error.str()})" for tp in partitions if tp.error is not None]
        if failed:
            self.commit_failed(", ".join(failed))

    def commit_failed(self, detail: str) -> None:
        self.failed_commits += 1
        _log.warning(
            "committing %s offsets failed (%s): messages after the last commit may be read again (duplicates)",
            self.config.queue_topic,
            detail,
        )
