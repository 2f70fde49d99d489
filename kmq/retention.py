"""Durations the markers topic can hold: a START must outlive its duration, or the message is lost (issue 15, item 6).

A nack delay, an extension or a processing timeout as long as the markers topic's `retention.ms` lets the broker
delete the START before it is due: the tracker never sees it, and the message is never redelivered. `RetentionLimit`
reads `retention.ms` once, at the first duration worth checking, and refuses such durations with
`DurationTooLongError`. Durations under `UNCHECKED_BELOW_MS` are never checked (no markers topic sensibly keeps
records for less than a minute; kmq creates it with a week), so the usual ones cost no broker round trip.
"""

from __future__ import annotations

import logging
import threading

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource

from kmq.config import KmqConfig
from kmq.errors import DurationTooLongError
from kmq.kafka import admin_settings

_log = logging.getLogger(__name__)
UNCHECKED_BELOW_MS = 60_000
_READ_TIMEOUT_S = 5.0


class RetentionLimit:
    """Thread-safe; the broker is asked at most once per instance."""

    def __init__(self, config: KmqConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._read = False
        self._retention_ms: int | None = None

    def check(self, duration_ms: int, what: str) -> None:
        """DurationTooLongError when `duration_ms` is not shorter than the markers topic's retention."""
        if duration_ms < UNCHECKED_BELOW_MS:
            return
        retention_ms = self.retention_ms()
        if retention_ms is not None and duration_ms >= retention_ms:
            raise DurationTooLongError(what, duration_ms, self.config.markers_topic, retention_ms)

    def retention_ms(self) -> int | None:
        """The markers topic's retention.ms; None when unlimited or unknown (the broker would not say)."""
        with self._lock:
            if not self._read:
                self._retention_ms = _read_retention_ms(self.config)
                self._read = True
            return self._retention_ms


def _read_retention_ms(config: KmqConfig) -> int | None:
    topic = config.markers_topic
    timeout_s = min(_READ_TIMEOUT_S, config.metadata_timeout_ms / 1000)
    admin = AdminClient(admin_settings(config))
    future = admin.describe_configs([ConfigResource("topic", topic)], request_timeout=timeout_s)
    try:
        entries = next(iter(future.values())).result(timeout=timeout_s + 1)
        value = entries["retention.ms"].value if "retention.ms" in entries else None
        retention_ms = int(value) if value is not None else -1
    except (KafkaException, TimeoutError, ValueError) as e:
        _log.warning("could not read retention.ms of %s (%s): long durations are not checked against it", topic, e)
        return None
    return retention_ms if retention_ms >= 0 else None
