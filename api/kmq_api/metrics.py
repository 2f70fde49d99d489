"""Every metric of the REST facade, on one explicit registry per app (two apps in a process never collide)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ApiMetrics:
    """Counters by queue topic; nothing else is a label (STYLE.md: topic and partition only)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.sent = self._counter("kmq_api_messages_sent", "messages written to the queue through the API")
        self.received = self._counter("kmq_api_messages_received", "messages handed to HTTP receivers")
        self.acks = self._counter("kmq_api_acks", "END markers written for ack receipts")
        self.nacks = self._counter("kmq_api_nacks", "START markers written for nack receipts")
        self.extends = self._counter("kmq_api_extends", "START markers written for extend receipts")
        self.refused = self._counter("kmq_api_receipts_refused", "receipts refused: invalid, forged or other queue")
        self.expired = self._counter("kmq_api_receipts_expired", "receipts used after their delivery's deadline")
        self.replayed = self._counter(
            "kmq_api_receipts_replayed", "settles refused with 409: the delivery was already settled (or in settling)"
        )
        self.failed = self._counter("kmq_api_markers_failed", "markers the broker refused for one receipt")
        self.broker_errors = self._counter("kmq_api_broker_errors", "requests answered 503 because of Kafka")
        self.last_progress = Gauge(
            "kmq_api_last_progress_seconds",
            "Seconds since a request last finished while requests were in progress (0 when none is)",
            registry=self.registry,
        )
        self.remembered = Gauge(
            "kmq_api_receipt_notes",
            "ack and nack notes (one per marker record) this replica keeps from the markers topic until they expire",
            ["topic"],
            registry=self.registry,
        )
        self.settle_seconds = Histogram(
            "kmq_api_settle_duration_seconds",
            "ack/nack/extend: from request to the markers acknowledged by the broker",
            ["topic"],
            registry=self.registry,
            buckets=_LATENCY_BUCKETS_S,
        )

    def _counter(self, name: str, documentation: str) -> Counter:
        return Counter(name, documentation, ["topic"], registry=self.registry)
