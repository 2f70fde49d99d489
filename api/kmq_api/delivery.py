"""Producing from the event loop: records go out from a worker thread, delivery reports come back as awaitables.

A daemon thread serves the producer's delivery reports, so a request waits for exactly its own records (never for
a `flush()` of everybody's) and the event loop never blocks in librdkafka.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio.to_thread
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import Message as KafkaMessage

from kmq.config import KafkaValue, KmqConfig
from kmq.errors import BrokerUnavailableError
from kmq.headers import Headers
from kmq.kafka import admin_settings, is_unknown_partition, learn_partitions

_log = logging.getLogger(__name__)
ANY_PARTITION = -1
# Java clients hash keys with murmur2: the same key lands in the same partition whoever produces it. linger.ms 1, not
# 0: with 0 each produce() wakes librdkafka's broker thread, and in paired api.bench runs on Apache Kafka the API
# then spent ~20 % more CPU per message for ~0.5 ms off the ack p50 and no more throughput (0.5 ms: as 1).
_DEFAULTS: dict[str, KafkaValue] = {"linger.ms": 1, "partitioner": "murmur2_random"}
_DURABLE: dict[str, KafkaValue] = {"acks": "all", "enable.idempotence": True}
_SERVE_INTERVAL_S = 0.1
_OUTAGE = frozenset({KafkaError._MSG_TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    value: bytes | None
    key: bytes | None = None
    headers: Headers | None = None
    partition: int = ANY_PARTITION


@dataclass(frozen=True, slots=True)
class Delivered:
    partition: int
    offset: int
    timestamp_ms: int


Outcome = Delivered | KafkaError


def is_outage(error: KafkaError) -> bool:
    """A failure of the cluster (unreachable, timed out, retriable) rather than a refusal of this one record."""
    return error.code() in _OUTAGE or error.retriable()


class _Batch:
    """Collects one request's delivery reports (in the serving thread) and resolves its future when complete."""

    def __init__(self, size: int, future: asyncio.Future[list[Outcome]]) -> None:
        self.outcomes: list[Outcome | None] = [None] * size
        self._remaining = size
        self._future = future
        self._loop = future.get_loop()
        self._lock = threading.Lock()

    def report(self, index: int, error: KafkaError | None, message: KafkaMessage | None) -> None:
        if error is None and message is not None:
            outcome: Outcome = Delivered(message.partition() or 0, message.offset() or 0, message.timestamp()[1])
        else:
            outcome = error if error is not None else KafkaError(KafkaError._FAIL, "no delivery report")
        with self._lock:
            self.outcomes[index] = outcome
            self._remaining -= 1
            complete = self._remaining == 0
        if complete:
            self._loop.call_soon_threadsafe(self._resolve)

    def _resolve(self) -> None:
        if not self._future.done():
            self._future.set_result([outcome for outcome in self.outcomes if outcome is not None])


class AsyncProducer:
    """An idempotent `acks=all` producer for one queue's cluster; `produce` awaits the records' delivery reports."""

    def __init__(
        self,
        config: KmqConfig,
        write_timeout_ms: int,
        name: str,
        on_death: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        # admin_settings: librdkafka's log lines go through the `kmq.kafka` logger (the serving thread's poll hands
        # them over), not straight to stderr.
        settings = {**_DEFAULTS, **admin_settings(config), **_DURABLE, "message.timeout.ms": write_timeout_ms}
        self.bootstrap_servers = config.bootstrap_servers
        self.fatal_error: str | None = None  # set once librdkafka reports a fatal error: nothing is written again
        self._producer = Producer({**settings, "error_cb": self._on_error})
        # librdkafka gives up on a record at message.timeout.ms; the margin covers the report's way back.
        self.timeout_s = write_timeout_ms / 1000 + 5.0
        self._stopping = threading.Event()
        self._on_death = on_death  # the serving thread died on an unexpected error (no report would come back)
        self._thread = threading.Thread(target=self._serve, name=f"kmq-api-delivery-{name}", daemon=True)
        self._thread.start()

    async def produce(self, records: Sequence[Record]) -> list[Outcome]:
        """Each record's outcome, in order; BrokerUnavailableError when the reports do not come back in time."""
        if not records:
            return []
        if self.fatal_error is not None:
            raise BrokerUnavailableError(self.bootstrap_servers, f"this replica's producer failed: {self.fatal_error}")
        future: asyncio.Future[list[Outcome]] = asyncio.get_running_loop().create_future()
        batch = _Batch(len(records), future)
        # produce() only enqueues (librdkafka's asynchronous API): it runs on the loop until the local queue is
        # full; waiting for room is blocking, so the rest of the records then go out from a worker thread.
        queued = self._enqueue(records, batch, 0, wait_for_room=False)
        if queued < len(records):
            await anyio.to_thread.run_sync(self._enqueue, records, batch, queued, True)
        try:
            return await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError as e:
            raise BrokerUnavailableError(self.bootstrap_servers, f"no delivery report in {self.timeout_s:.0f}s") from e

    def close(self, timeout_s: float) -> int:
        """Flush what is in flight, then stop serving reports; the number of records left unacknowledged."""
        remaining = int(self._producer.flush(timeout_s))
        self._stopping.set()
        self._thread.join()
        if remaining:
            _log.warning("%d records to %s unacknowledged at shutdown", remaining, self.bootstrap_servers)
        return remaining

    def _enqueue(self, records: Sequence[Record], batch: _Batch, start: int, wait_for_room: bool) -> int:
        """Produce records from `start`; the index of the first one not queued (all, when waiting for room)."""
        for index in range(start, len(records)):
            if not self._produce_one(records[index], functools.partial(batch.report, index), wait_for_room):
                return index
        return len(records)

    def _produce_one(self, record: Record, report: functools.partial[None], wait_for_room: bool) -> bool:
        learned = False
        while True:
            try:
                self._producer.produce(
                    record.topic,
                    value=record.value,
                    key=record.key,
                    headers=record.headers,  # type: ignore[arg-type]  # list of (str, bytes) pairs is accepted
                    partition=record.partition,
                    on_delivery=report,
                )
            except BufferError:
                if not wait_for_room:
                    return False
                self._producer.poll(_SERVE_INTERVAL_S)  # the local queue is full: wait for room
            except KafkaException as e:
                error = e.args[0] if e.args else KafkaError(KafkaError._FAIL)
                if is_unknown_partition(error) and not learned:  # a partition added since (kmq topics grow)
                    learn_partitions(self._producer, record.topic)
                    learned = True
                    continue
                report(error, None)
                return True
            else:
                return True

    def _on_error(self, error: KafkaError) -> None:
        """librdkafka's error events (served by the serving thread); a fatal one ends this producer for good."""
        if error.fatal():
            _log.error("producer to %s: fatal error: %s", self.bootstrap_servers, error.str())
            self.fatal_error = self.fatal_error or error.str()
        else:
            _log.warning("producer to %s: %s", self.bootstrap_servers, error.str())

    def _serve(self) -> None:
        try:
            while not self._stopping.is_set():
                self._producer.poll(_SERVE_INTERVAL_S)
        except BaseException as e:
            if self._on_death is None:
                raise
            self._on_death(threading.current_thread().name, e)
