"""`MarkerWriter`: produces START and END markers to the markers partition aligned with the message's."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import Message as KafkaMessage

from kmq.config import KmqConfig
from kmq.delivery import DeliveryGroup
from kmq.errors import DeliveryError
from kmq.kafka import DeliveryCallback, produce, producer_settings
from kmq.markers import EndMarker, MarkerKey, StartMarker, encode_key

_log = logging.getLogger(__name__)
_END = EndMarker().encode()


class MarkerWriter:
    """Writes markers for one queue. END, nack and extend markers are fire-and-forget: a lost one only costs a
    redelivery, so failures are logged and counted in `failed_markers`, never raised. Thread-safe."""

    def __init__(self, config: KmqConfig, producer: Producer | None = None) -> None:
        self.config = config
        self._topic = config.markers_topic
        self.producer = producer if producer is not None else Producer(producer_settings(config))
        self.failed_markers = 0

    def start(self, key: MarkerKey, redeliver_after_ms: int, on_delivery: DeliveryCallback | None = None) -> None:
        """Produce a START (also used for nack and extend: the newest START of a key wins)."""
        value = StartMarker(redeliver_after_ms).encode()
        self._produce(key.partition, key.encode(), value, on_delivery or self._on_marker_delivery)
        self.producer.poll(0)

    def end(self, key: MarkerKey) -> None:
        """Produce an END without waiting for it."""
        self.end_at(key.partition, key.offset)

    def end_at(self, partition: int, offset: int) -> None:
        """`end` for the message at (partition, offset): the per-message path of `processed()`, no MarkerKey built."""
        self._produce(partition, encode_key(partition, offset), _END, self._on_marker_delivery)
        self.producer.poll(0)  # serve delivery reports as we go, so they never pile up

    def starts_and_wait(self, keys: Sequence[MarkerKey], redeliver_after_ms: int, timeout_s: float) -> None:
        """Produce a START per key and wait until all are acknowledged; DeliveryError when any failed."""
        self.produce_starts(keys, redeliver_after_ms).wait(self.producer, timeout_s)

    def produce_starts(self, keys: Sequence[MarkerKey], redeliver_after_ms: int) -> DeliveryGroup:
        """Produce a START per key; a record refused at once (e.g. no such partition) raises DeliveryError."""
        group = DeliveryGroup()
        value = StartMarker(redeliver_after_ms).encode()
        for key in keys:
            try:
                self._produce(key.partition, key.encode(), value, group.counted())
            except KafkaException as e:
                raise DeliveryError(self.config.markers_topic, key.partition, str(e.args[0].str())) from e
        self.producer.poll(0)
        return group

    def flush(self, timeout_s: float = 30.0) -> int:
        """Wait for markers in flight; the number still unacknowledged at the deadline."""
        return self.producer.flush(timeout_s)

    def _produce(self, partition: int, key: bytes, value: bytes, callback: DeliveryCallback) -> None:
        """To the markers partition of the message's partition; the direct call first (this runs once per marker)."""
        try:
            self.producer.produce(self._topic, value, key, partition=partition, on_delivery=callback)
        except BufferError:
            produce(self.producer, self._topic, value, key, partition=partition, on_delivery=callback)

    def _on_marker_delivery(self, error: KafkaError | None, message: KafkaMessage) -> None:
        if error is not None:
            self.failed_markers += 1
            _log.warning(
                "marker for %s[%s] was not written (%s); the message may be redelivered",
                self.config.queue_topic,
                message.partition(),
                error.str(),
            )
