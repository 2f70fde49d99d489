"""Every metric of the tracker, on a registry of its own (one per service, so replicas in one process stay apart)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "TrackerMetrics"]

_PARTITION = ("topic", "partition")
# Lateness is judged against a 250 ms target: resolve it finely below a second, coarsely above.
_LATENESS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class TrackerMetrics:
    """The tracker's Prometheus metrics; labels are limited to topic and partition."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.pending = Gauge(
            "kmq_pending_messages", "STARTs without END, per markers partition", _PARTITION, registry=r
        )
        self.oldest_pending_age = Gauge(
            "kmq_oldest_pending_age_seconds",
            "How long the earliest pending deadline has passed (0 when none is due): the redelivery backlog",
            _PARTITION,
            registry=r,
        )
        self.caught_up = Gauge(
            "kmq_partition_caught_up",
            "1 once the markers partition was read to its end at assignment",
            _PARTITION,
            registry=r,
        )
        self.pass_seconds = Gauge(
            "kmq_redelivery_pass_seconds",
            "How long the partition's running redelivery pass has taken so far (0 when none runs): a partition the "
            "broker is slow or stuck on shows here, while the other partitions go on",
            _PARTITION,
            registry=r,
        )
        self.markers_consumed = Counter("kmq_markers_consumed", "Records consumed from the markers topic", registry=r)
        self.redeliveries = Counter("kmq_redeliveries", "Copies written back to the queue topic", registry=r)
        self.dead_letters = Counter("kmq_dead_letters", "Messages written to the dead-letter topic", registry=r)
        self.settled = Counter(
            "kmq_settled_deliveries",
            "Pending STARTs settled by an END read from the markers topic (acknowledged, or rejected by a worker), per "
            "markers partition, from the time the replica caught up on it: the acknowledged rate",
            _PARTITION,
            registry=r,
        )
        self.redelivered = Counter(
            "kmq_redelivered_messages",
            "Copies written back to the queue topic, per markers partition (kmq_redeliveries counts them all)",
            _PARTITION,
            registry=r,
        )
        self.unconfirmed_passes = Counter(
            "kmq_redelivery_passes_unconfirmed",
            "Redelivery passes whose markers partition's end, asked afresh, lay past what was read (or did not "
            "answer): the messages only the end had vouched for wait, the others were redelivered",
            registry=r,
        )
        self.undecodable = Counter(
            "kmq_undecodable_markers", "Records on the markers topic that are not markers", registry=r
        )
        self.missing = Counter(
            "kmq_missing_messages",
            "Due messages the queue topic no longer holds (below its log start: retention) or never held (negative "
            "offsets, past its end)",
            registry=r,
        )
        self.no_record = Counter(
            "kmq_no_record_offsets",
            "Due STARTs of offsets that hold no data record (a transaction marker, an aborted record): ENDed as "
            "finished, never redelivered",
            registry=r,
        )
        self.undeliverable_truncated = Counter(
            "kmq_undeliverable_truncated",
            "Copies refused for good whose dead letter was refused too, written with the value truncated",
            registry=r,
        )
        self.undeliverable_unwritable = Counter(
            "kmq_undeliverable_unwritable",
            "Copies refused for good that not even a truncated dead letter could hold (logged, then ENDed)",
            registry=r,
        )
        self.redelivery_errors = Counter("kmq_redelivery_errors", "Failed redelivery attempts (retried)", registry=r)
        self.last_progress = Gauge(
            "kmq_tracker_last_progress_seconds",
            "Seconds since the tracker last made progress while work waited (0 when nothing waits)",
            registry=r,
        )
        self.misaligned = Gauge(
            "kmq_topics_misaligned",
            "1 while the queue and markers topics have different partition counts (messages left untracked)",
            registry=r,
        )
        self.lateness = Histogram(
            "kmq_redelivery_lateness_seconds",
            "Time from a deadline to the acknowledged copy or dead letter",
            buckets=_LATENESS_BUCKETS,
            registry=r,
        )

    def watch_progress(self, last_progress_s: Callable[[], float]) -> None:
        self.last_progress.set_function(last_progress_s)

    def set_partition(
        self,
        topic: str,
        partition: int,
        pending: int,
        overdue_ms: int,
        caught_up: bool,
        pass_ms: int = 0,
        settled: int = 0,
    ) -> None:
        labels = (topic, str(partition))
        self.settled.labels(*labels).inc(settled)
        self.redelivered.labels(*labels)  # the series exists (at 0) from the assignment on
        self.pass_seconds.labels(*labels).set(pass_ms / 1000)
        self.pending.labels(*labels).set(pending)
        self.oldest_pending_age.labels(*labels).set(overdue_ms / 1000)
        self.caught_up.labels(*labels).set(1 if caught_up else 0)

    def drop_partition(self, topic: str, partition: int) -> None:
        """Forget a partition this replica no longer owns, so its gauges do not linger."""
        for gauge in (self.pending, self.oldest_pending_age, self.caught_up, self.pass_seconds):
            try:
                gauge.remove(topic, str(partition))
            except KeyError:
                continue

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample's current value (0 when absent): for tests, the benchmark and the readiness check."""
        found = self.registry.get_sample_value(name, labels or {})
        return 0.0 if found is None else found
