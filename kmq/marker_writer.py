"""Producing START and END markers to the markers partition aligned with the message's (PROTOCOL.md).

Two writers, each on a producer of its own, both with `delivery.report.only.error` (a success costs no Python
callback): `StartWriter` for the STARTs of a received batch, which the client waits for, and `MarkerWriter` for the
fire-and-forget ones (END, nack, extend). A failure of the one can never be taken for a failure of the other.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import Message as KafkaMessage

from kmq.batch_markers import BatchEnd, BatchStart, Run, contiguous_runs, split_runs
from kmq.config import KmqConfig
from kmq.delivery import Failures
from kmq.errors import DeliveryError
from kmq.kafka import DeliveryCallback, is_unknown_partition, learn_partitions, marker_producer_settings, produce
from kmq.markers import EndMarker, MarkerKey, StartMarker, encode_key

_log = logging.getLogger(__name__)
_END = EndMarker().encode()
_ROOM_WAIT_S = 0.05
_WAIT_SLICE_S = 0.001
_SERVE_INTERVAL_S = 0.1
Offsets = Mapping[int, Sequence[int]]  # queue partition -> offsets of the batch's messages in it


class StartWriter:
    """Writes the START markers of a batch and waits until every one is acknowledged (step 2 of the client flow).

    Its producer carries nothing but these batches, one at a time, so its queue being empty means the whole batch is
    durable; each batch collects its failures in a `Failures` of its own. The records of a partition go to librdkafka
    in one `produce_batch` call.
    """

    def __init__(self, config: KmqConfig, producer: Producer | None = None) -> None:
        self.config = config
        self._topic = config.markers_topic
        # No flush() triggers the send (see `wait`): a batch's BATCH STARTs (one per partition) go out at once; kmq
        # STARTs (one per message) linger 1 ms, time for `produce_batch` to queue a partition's records: at 0
        # librdkafka sent them in many small requests as they were queued (measured: kmq contender 5x the CPU per
        # message).
        linger_ms = 0 if config.marker_format == "batch" else 1
        if producer is None:  # (not `producer or ...`: a Producer's truth is its queue length)
            producer = Producer(marker_producer_settings(config, linger_ms=linger_ms))
        self.producer = producer

    def produce(self, offsets: Offsets, redeliver_after_ms: int) -> Failures:
        """Queue a START per offset; DeliveryError when librdkafka refuses one at once (e.g. no such partition)."""
        failures = Failures()
        for partition, partition_offsets in offsets.items():
            self.produce_records(
                partition, self.records(partition, partition_offsets, redeliver_after_ms), failures.report
            )
        return failures

    def records(self, partition: int, offsets: Sequence[int], redeliver_after_ms: int) -> list[dict[str, Any]]:
        """The START records of one partition's offsets: one kmq START per offset, or (format `batch`) one BATCH
        START (more only past a record's limits)."""
        if self.config.marker_format == "batch":
            return [
                {"key": encode_key(partition, runs[0][0]), "value": BatchStart(redeliver_after_ms, runs).encode()}
                for runs in split_runs(contiguous_runs(offsets))
            ]
        value = StartMarker(redeliver_after_ms).encode()
        return [{"key": encode_key(partition, offset), "value": value} for offset in offsets]

    def wait(self, failures: Failures, timeout_s: float) -> None:
        """Wait until the batch is acknowledged; DeliveryError for its first failure or at the deadline.

        Not `flush()`: librdkafka's flush sleeps in 10 ms slices between checks unless a delivery report wakes it,
        and a success reports nothing here, so each batch waited ~3-5 ms past its acknowledgement (measured: half
        the kmq-batch window). `poll()` in 1 ms slices returns at once with a failure's report; `len()`, unlike
        `flush(0)`, wakes no broker thread."""
        producer = self.producer
        deadline = time.monotonic() + timeout_s
        producer.poll(0)
        while len(producer) and time.monotonic() < deadline:
            producer.poll(_WAIT_SLICE_S)
        failures.check(len(producer), timeout_s)

    def flush(self, timeout_s: float) -> int:
        return self.producer.flush(timeout_s)

    def produce_records(self, partition: int, records: list[dict[str, Any]], callback: DeliveryCallback) -> None:
        """Queue `records` to markers partition `partition`; DeliveryError for a refusal that waiting cannot cure."""
        producer = self.producer
        learned = False
        while records:
            queued = producer.produce_batch(self._topic, records, partition=partition, on_delivery=callback)
            if queued == len(records):
                return
            records, learned = self._refused(producer, partition, records, learned)

    def _refused(
        self, producer: Producer, partition: int, records: list[dict[str, Any]], learned: bool
    ) -> tuple[list[dict[str, Any]], bool]:
        """The records to offer again: once the local queue has room, or once the producer has learnt of the
        partitions added to the markers topic since it last read its metadata (`kmq topics grow`); DeliveryError
        for any other refusal, and for a partition the topic still does not have."""
        refused = [record for record in records if "_error" in record]
        unknown = any(is_unknown_partition(record["_error"]) for record in refused)
        learn_now = unknown and not learned  # the one refresh: then offer every refused record again
        for record in refused:
            error: KafkaError = record["_error"]
            if error.code() != KafkaError._QUEUE_FULL and not learn_now:
                raise DeliveryError(self._topic, partition, error.str())
        if learn_now:
            learn_partitions(producer, self._topic)
        else:
            producer.poll(_ROOM_WAIT_S)
        return [{k: v for k, v in record.items() if k != "_error"} for record in refused], learned or learn_now


class MarkerWriter:
    """Writes END, nack and extend markers. They are fire-and-forget: a lost one only costs a redelivery, so failures
    are logged and counted in `failed_markers`, never raised. Thread-safe.

    Delivery reports are served by `serve()` (the client calls it once per batch), by `flush()`, and whenever the
    local queue is full: not after every marker, as successes report nothing."""

    def __init__(self, config: KmqConfig, producer: Producer | None = None) -> None:
        self.config = config
        self._topic = config.markers_topic
        self.producer = producer if producer is not None else Producer(marker_producer_settings(config))
        self.failed_markers = 0
        self._served_at = 0.0
        self._count_lock = threading.Lock()  # reports are served by whichever thread polls or flushes
        self._report = self._on_failure

    def start(self, key: MarkerKey, redeliver_after_ms: int) -> None:
        """Produce a START (nack and extend: the newest START of a key wins)."""
        value = StartMarker(redeliver_after_ms).encode()
        self._produce(key.partition, key.encode(), value)

    def end(self, key: MarkerKey) -> None:
        """Produce an END without waiting for it."""
        self._produce(key.partition, key.encode(), _END)

    def end_at(self, partition: int, offset: int) -> None:
        """`end` for the message at (partition, offset). The per-message path of `processed()`: no MarkerKey, the
        direct produce call here (a full queue or a refusal takes the careful way), the callback bound once, and
        positional arguments (confluent-kafka parses keywords at ~0.35 us per call)."""
        key = encode_key(partition, offset)
        try:
            self.producer.produce(self._topic, _END, key, partition, self._report)
        except (BufferError, KafkaException):
            self._produce(partition, key, _END)

    def batch_end(self, partition: int, runs: tuple[Run, ...]) -> None:
        """Produce a BATCH END for the runs of queue partition `partition` without waiting for it."""
        self._produce(partition, encode_key(partition, runs[0][0]), BatchEnd(runs).encode())

    def serve(self) -> None:
        """Serve the delivery reports that arrived, at most every `_SERVE_INTERVAL_S`: failures reach
        `failed_markers`, successes cost nothing (a call per batch measured ~1 ms of the receive thread's GIL wait)."""
        now = time.monotonic()
        if now - self._served_at >= _SERVE_INTERVAL_S:
            self._served_at = now
            self.producer.poll(0)

    def flush(self, timeout_s: float = 30.0) -> int:
        """Wait for markers in flight; the number still unacknowledged at the deadline."""
        return self.producer.flush(timeout_s)

    def _produce(self, partition: int, key: bytes, value: bytes) -> None:
        """To the markers partition of the message's partition; the direct call first (this runs once per marker)."""
        try:
            self.producer.produce(self._topic, value, key, partition, self._report)
        except (BufferError, KafkaException):  # a full queue, or a partition added since: the careful way
            try:
                produce(self.producer, self._topic, value, key, partition=partition, on_delivery=self._report)
            except KafkaException as e:  # refused at once (e.g. no such partition): as lost as a failed delivery
                self._failed(partition, e.args[0].str())

    def _on_failure(self, error: KafkaError | None, message: KafkaMessage) -> None:
        if error is not None:
            self._failed(message.partition(), error.str())

    def _failed(self, partition: int | None, detail: str) -> None:
        with self._count_lock:
            self.failed_markers += 1
        _log.warning(
            "marker for %s[%s] was not written (%s); the message may be redelivered",
            self.config.queue_topic,
            partition,
            detail,
        )


def first_of(offsets: Offsets) -> tuple[int, int]:
    """(partition, offset) of the first message of a batch: what a MarkerWriteError names."""
    partition, partition_offsets = next(iter(offsets.items()))
    return partition, partition_offsets[0]
