"""`KmqClient`: the consumer side of a kmq queue (PROTOCOL.md, "Client flow")."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import Message as KafkaMessage

from kmq import headers as h
from kmq.admin import check_topics
from kmq.config import KmqConfig
from kmq.consumer_close import close_consumer
from kmq.consumer_turns import FIRST_IDLE_SLICE_S, SLICE_S, ConsumerTurns
from kmq.delivery import DeliveryGroup
from kmq.end_batcher import PARTITION_SHIFT, EndBatcher, packed
from kmq.errors import ClientClosedError, TrackerCompatibilityError
from kmq.kafka import consumer_settings, fetch, produce, producer_settings
from kmq.liveness import KafkaLiveness
from kmq.marker_writer import MarkerWriter
from kmq.markers import MarkerKey
from kmq.message import Message, from_records, offsets_by_partition
from kmq.retention import RetentionLimit
from kmq.starts import Starts, start_mode

_log = logging.getLogger(__name__)
Target = Message | MarkerKey


class KmqClient:
    """Receives messages from the queue and acknowledges them one by one.

    `receive` is for one thread; `processed`, `nack` and `extend` may be called from any thread.
    """

    def __init__(self, config: KmqConfig, check: bool = True, marker_timeout_s: float = 30.0) -> None:
        if check:
            check_topics(config)
        self.config = config
        self._marker_timeout_s = marker_timeout_s
        isolation = {"isolation_level": "read_committed"}
        settings = consumer_settings(config, config.group_id, **isolation)
        pipelined = config.pipelined and not config.transactional
        self._consumer = Consumer({**settings, "on_commit": self._on_commit} if pipelined else settings)
        self._turns = ConsumerTurns()  # receive()'s consume never starves a commit from another thread
        self._slice_s = SLICE_S  # the next empty consume slice (`_poll`)
        self._ends: EndBatcher | None = None
        starts: Starts | None = None
        try:
            self._markers = MarkerWriter(config)
            starts = start_mode(config, self._consumer, self._turns, self._rewind, marker_timeout_s)
            self._gate = starts.gate
            if config.marker_format == "batch":
                hold = None if self._gate is None else self._gate.held
                self._ends = EndBatcher(self._markers.batch_end, config.end_flush_ms, hold=hold)
        except BaseException:
            # Nothing half-made stays behind (a caller such as the REST facade tries again and again).
            if self._ends is not None:
                self._ends.close()
            if starts is not None:
                starts.close(0)
            self._consumer.close()
            if "_markers" in self.__dict__:  # (it holds a bound method of its own: only the cyclic GC would free it)
                self._markers.producer.close()
            raise
        self._starts = starts
        self._revoke_listeners: list[Callable[[set[int]], object]] = []
        self._consumer.subscribe([config.queue_topic], on_revoke=self._on_revoke)
        self._begin = self._starts.begin
        self._end_at = self._markers.end_at if self._ends is None else self._ends.add
        self._ack = None if self._ends is None else self._ends.add_ack
        self._retention = RetentionLimit(config)
        self._liveness = KafkaLiveness(self._consumer, config, config.queue_topic, f"the consumer of {config.group_id}")
        self._lock = threading.Lock()
        self._dead_letters: Producer | None = None
        self._closed = False
        self._warned_long_nack = False

    def receive(
        self, max_messages: int = 500, timeout_s: float = 1.0, msg_timeout_ms: int | None = None
    ) -> list[Message]:
        """One batch (empty on timeout). Pipelined (the default): the STARTs are queued and the messages returned at
        once; the offsets are committed asynchronously once the STARTs are acknowledged, and a START that failed
        raises `MarkerWriteError` here, one `receive()` later. Otherwise: STARTs durable, then offsets committed,
        then the messages.

        `msg_timeout_ms` overrides the configured time the application has before a redelivery.
        """
        self._check_open()
        self._starts.check()
        self._retention.check(
            self.config.msg_timeout_ms if msg_timeout_ms is None else msg_timeout_ms, "msg_timeout_ms"
        )
        self._markers.serve()  # the fire-and-forget markers' failure reports, once per batch
        # 1. Poll up to max_messages from Q.
        records = self._poll(max_messages, timeout_s)
        self._liveness.check(heard=bool(records))  # KafkaUnavailableError once no broker answers (kmq.liveness)
        if not records:
            return []
        timeout_ms = self.config.msg_timeout_ms if msg_timeout_ms is None else msg_timeout_ms
        # The tracker's deadline is the marker's timestamp + timeout; the clock before producing is a safe estimate.
        deadline_ms = time.time_ns() // 1_000_000 + timeout_ms
        messages = from_records(records, self.config.queue_topic, deadline_ms)
        # 2-3. STARTs and the offsets' commit, as the start mode does them (kmq.starts).
        self._begin(offsets_by_partition(messages), timeout_ms)
        # 4. Hand the messages to the application.
        return messages

    def wait_started(self, timeout_s: float | None = None) -> None:
        """Wait until the STARTs of every batch handed over are acknowledged (pipelined; at once otherwise). Raises
        `MarkerWriteError` when one failed (the batch rewound) or when they are not acknowledged within `timeout_s`
        (default: the client's marker timeout).

        For a caller whose acknowledgements do not go through this client, which therefore cannot hold them back
        until the START is acknowledged: the REST facade, whose receipts may be settled on any replica."""
        self._starts.wait_started(self._marker_timeout_s if timeout_s is None else timeout_s)

    def processed(self, msg: Target) -> None:
        """5. The message is done: write END without waiting (a lost END only costs a redelivery).

        With `marker_format="batch"` the acknowledgement joins a BATCH END written within `end_flush_ms`."""
        if self._closed:
            self._check_open()
        # Once per message: no MarkerKey built, one call into the writer (or a deque's append, for the batcher).
        # Pipelined, the END follows its START: the batcher holds a BATCH END's acks back (never this path), the gate
        # a kmq END (at once when the START is acknowledged).
        if self._ack is not None:
            self._ack(msg.partition << PARTITION_SHIFT | msg.offset)  # one int: what the batcher holds (no tuple)
        elif self._gate is not None:
            self._gate.run(msg.partition, msg.offset, self._end_at, msg.partition, msg.offset)
        else:
            self._end_at(msg.partition, msg.offset)

    @property
    def ends_batched(self) -> bool:
        """True with `batch` markers: `processed` only queues the acknowledgement for the thread that writes BATCH
        ENDs, so any thread may call it without contending for the producer."""
        return self._ends is not None

    def processed_many(self, messages: Iterable[Target]) -> None:
        """`processed` for many messages at once (with `batch` markers: packed and queued in C, no loop per
        message in Python)."""
        self._check_open()
        if self._ends is not None:
            self._ends.add_many(packed(messages if isinstance(messages, list) else list(messages)))
        elif self._gate is not None:
            for msg in messages:
                self._gate.run(msg.partition, msg.offset, self._end_at, msg.partition, msg.offset)
        else:
            for msg in messages:
                self._end_at(msg.partition, msg.offset)

    def nack(self, msg: Target, delay_ms: int | None = None) -> None:
        """Redeliver after `delay_ms`; None backs off exponentially with the message's delivery count."""
        self._check_open()
        if delay_ms is None:
            delay_ms = self.config.nack_delay_ms(msg.redelivery_count if isinstance(msg, Message) else 0)
        if self.config.redelivery_tracker == "jvm" and delay_ms > self.config.msg_timeout_ms:
            self._warn_long_nack(delay_ms)
        self._retention.check(delay_ms, "nack delay_ms")
        self._marker(self._markers.start, _key(msg), max(0, delay_ms))

    def extend(self, msg: Target, timeout_ms: int) -> None:
        """Give the application `timeout_ms` more, counted from the new marker's timestamp."""
        self._check_open()
        if timeout_ms <= 0:
            raise ValueError("timeout_ms must be positive; use nack(msg, 0) to redeliver at once")
        if self.config.redelivery_tracker == "jvm":
            raise TrackerCompatibilityError(
                "extend needs this project's tracker: a JVM kmq tracker (redelivery_tracker='jvm') redelivers at the"
                " first START's deadline whatever comes after; raise msg_timeout_ms instead"
            )
        self._retention.check(timeout_ms, "extend timeout_ms")
        self._marker(self._markers.start, _key(msg), timeout_ms)

    def reject(self, msg: Message, reason: str) -> None:
        """Write the message to the dead-letter topic (waiting for it), then END: it is never redelivered."""
        self._check_open()
        dead_headers = h.dead_letter(msg.headers, msg.topic, msg.partition, msg.offset, f"rejected: {reason}")
        group = DeliveryGroup()
        producer = self._dead_letter_producer()
        produce(
            producer, self.config.dead_letter_topic, msg.value, msg.key, dead_headers, on_delivery=group.callback(0)
        )
        group.wait(producer, self._marker_timeout_s)
        self._marker(self._markers.end, msg.marker_key)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Write the acknowledgements gathered so far, and wait until every marker written is acknowledged (or the
        timeout passes). Pipelined: first wait for the STARTs in flight and commit what they allow, synchronously."""
        self._starts.settle(timeout_s)
        if self._ends is not None:
            self._ends.flush()
        remaining = self._markers.flush(timeout_s) + self._starts.flush(timeout_s)
        if self._dead_letters is not None:  # holds something only if a reject gave up waiting
            remaining += self._dead_letters.flush(timeout_s)
        if remaining:
            _log.warning("%d markers still unacknowledged after %.1fs", remaining, timeout_s)

    @property
    def fatal_error(self) -> str | None:
        """Why this client cannot receive any more (a transactional producer that cannot be replaced), or None."""
        return self._starts.fatal_error

    @property
    def failed_commits(self) -> int:
        """Asynchronous offset commits that failed (pipelined): each may cause re-reads, never a loss."""
        return self._starts.failed_commits

    @property
    def failed_markers(self) -> int:
        """END/nack/extend markers the broker did not acknowledge (each may cause a redelivery)."""
        return self._markers.failed_markers

    def pause(self, partitions: Iterable[int]) -> None:
        """Stop fetching these partitions of the queue (those assigned now): what was fetched ahead of `receive` is
        dropped, and fetched again from the next unreceived offset after `resume`."""
        self._check_open()
        with self._turns.call():  # from any thread: it goes between two of receive()'s consume slices
            if assigned := self._assigned(partitions):
                self._consumer.pause(assigned)

    def resume(self, partitions: Iterable[int]) -> None:
        """Fetch paused partitions again (those assigned now)."""
        self._check_open()
        with self._turns.call():
            if assigned := self._assigned(partitions):
                self._consumer.resume(assigned)

    def _assigned(self, partitions: Iterable[int]) -> list[TopicPartition]:
        wanted = set(partitions)
        topic = self.config.queue_topic
        return [tp for tp in self._consumer.assignment() if tp.topic == topic and tp.partition in wanted]

    def close(self, timeout_s: float = 30.0) -> None:
        """Flush outstanding markers and leave the consumer group. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._starts.settle(timeout_s)  # pipelined: its held-back ENDs reach the batcher before it closes
            if self._ends is not None:
                self._ends.close()
            self.flush(timeout_s)
        finally:
            try:
                self._starts.close(timeout_s)
            finally:
                close_consumer(self._consumer, timeout_s, f"the consumer of {self.config.group_id}", self._turns)

    def __enter__(self) -> KmqClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> Iterator[Message]:
        """Messages from successive batches, until `close()`."""
        while not self._closed:
            yield from self.receive()

    def _poll(self, max_messages: int, timeout_s: float) -> list[KafkaMessage]:
        """Consume in slices of at most `SLICE_S` (kmq.consumer_turns): a commit or flush from another thread takes
        its turn between two; the first slice that finds records returns them, without waiting for a full batch
        (`kmq.kafka.fetch`). The empty slices after a burst start at `FIRST_IDLE_SLICE_S` and double up to
        `SLICE_S`: a flush or commit that follows the last records waits a few ms for its turn, not a whole slice."""
        deadline = time.monotonic() + timeout_s
        while True:
            slice_s = self._slice_s
            with self._turns.consume():
                batch = fetch(self._consumer, max_messages, min(slice_s, timeout_s))
            # (read and written by the receiving thread only; two threads that take turns receiving share a hint)
            self._slice_s = FIRST_IDLE_SLICE_S if batch else min(SLICE_S, 2 * slice_s)
            timeout_s = deadline - time.monotonic()
            if batch or timeout_s <= 0:
                return self._records(batch)

    def _records(self, batch: list[KafkaMessage]) -> list[KafkaMessage]:
        records = []
        for record in batch:
            error = record.error()
            if error is None:
                records.append(record)
            elif error.fatal():
                raise KafkaException(error)
            elif error.code() != KafkaError._PARTITION_EOF:
                _log.warning("consuming %s: %s", self.config.queue_topic, error.str())
        return records

    def add_revoke_listener(self, listener: Callable[[set[int]], object]) -> None:
        """Call `listener(partitions)` when the group takes partitions of the queue away (a rebalance, `close`), on
        the thread that calls `receive` (or `close`), before the next owner reads them. Listeners run in the order
        added; an error in one propagates out of that `receive`."""
        self._revoke_listeners.append(listener)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """The group takes partitions away (rebalance, close): rule 4 before the next owner reads them, then the
        listeners."""
        revoked = {tp.partition for tp in partitions if tp.topic == self.config.queue_topic}
        self._starts.revoked(revoked, self._marker_timeout_s)
        if revoked:
            for listener in self._revoke_listeners:
                listener(revoked)

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        self._starts.on_commit(error, partitions)  # (the consumer commits nothing before the constructor returns)

    def _marker(self, write: Callable[..., None], key: MarkerKey, *args: object) -> None:
        """A marker of one message: after its START (pipelined)."""
        if self._gate is not None:
            self._gate.run(key.partition, key.offset, write, key, *args)
        else:
            write(key, *args)

    def _rewind(self, offsets: Mapping[int, Sequence[int]]) -> None:
        """Seek back to the first offset of the failed batch in each partition, so it is read again."""
        for partition, partition_offsets in offsets.items():
            try:
                with self._turns.call():
                    self._consumer.seek(TopicPartition(self.config.queue_topic, partition, min(partition_offsets)))
            except KafkaException as e:
                # Not assigned any more: the new owner reads from the last committed offset anyway.
                _log.info("could not rewind %s[%d]: %s", self.config.queue_topic, partition, e)

    def _dead_letter_producer(self) -> Producer:
        """Made on the first reject, which waits for its record's success: the marker producers report failures only."""
        with self._lock:
            if self._dead_letters is None:
                self._dead_letters = Producer(producer_settings(self.config, delivery_report_only_error=False))
            return self._dead_letters

    def _warn_long_nack(self, delay_ms: int) -> None:
        if not self._warned_long_nack:
            self._warned_long_nack = True
            _log.warning(
                "nack delay %d ms exceeds msg_timeout_ms %d: a JVM kmq tracker (redelivery_tracker='jvm') redelivers"
                " at the first deadline of the message, so the delay is cut short (warned once)",
                delay_ms,
                self.config.msg_timeout_ms,
            )

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"KmqClient for {self.config.queue_topic} is closed")


def _key(msg: Target) -> MarkerKey:
    return msg.marker_key if isinstance(msg, Message) else msg
