"""Every metric of a worker, on a registry of its own; labels are limited to the topic."""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from kmq.worker.breaker import BreakerState, Transition

_TOPIC = ("topic",)


class BulkHistogram(Collector):
    """A histogram of one topic fed in bulk (`observe_all`): a bisect per observation, where prometheus_client's
    `Histogram.observe` takes a lock and walks the buckets for each (a key's wait per message, on the lease thread,
    cost as much as the rest of that thread's work)."""

    def __init__(self, name: str, doc: str, topic: str, buckets: tuple[float, ...], registry: CollectorRegistry):
        self._name, self._documentation, self._topic = name, doc, topic
        self._type, self._labelnames = "histogram", _TOPIC  # as prometheus_client's metrics name them (the docs' list)
        self._bounds = list(buckets)  # upper bounds, ascending; +Inf after them
        self._counts = [0] * (len(buckets) + 1)  # per bucket, not cumulative
        self._sum = 0.0
        self._lock = threading.Lock()  # the lease thread observes, a scrape collects
        registry.register(self)

    def observe_all(self, values: Iterable[float]) -> None:
        bounds, where = self._bounds, bisect.bisect_left
        counts = [0] * len(self._counts)
        total = 0.0
        for value in values:
            counts[where(bounds, value)] += 1
            total += value
        with self._lock:
            self._counts = [mine + more for mine, more in zip(self._counts, counts, strict=True)]
            self._sum += total

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counts, total = list(self._counts), self._sum
        family = HistogramMetricFamily(self._name, self._documentation, labels=_TOPIC)
        les = [str(float(bound)) for bound in self._bounds] + ["+Inf"]  # as prometheus_client writes them
        family.add_metric([self._topic], list(zip(les, itertools.accumulate(counts), strict=True)), total)
        yield family


class WorkerMetrics:
    """Outcome counters are fed in bulk (`add`), not per message: the hot path only counts integers."""

    def __init__(self, topic: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.topic = topic
        r = self.registry

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, _TOPIC, registry=r)

        self.processed = counter("kmq_worker_processed", "Messages the handler processed (acknowledged)")
        self.retried = counter("kmq_worker_retried", "Messages nacked: Retry raised, or the handler failed")
        self.failed = counter("kmq_worker_failed", "Handler exceptions other than Retry and Reject")
        self.rejected = counter("kmq_worker_rejected", "Messages dead-lettered by Reject")
        self.extended = counter("kmq_worker_lease_extensions", "Leases extended while a handler ran")
        self.expired = counter("kmq_worker_expired", "Messages past the maximum processing time (nacked)")
        self.breaker_opened = counter("kmq_worker_breaker_opened", "Transitions of the breaker to open")
        self.breaker_half_opened = counter("kmq_worker_breaker_half_opened", "Transitions of the breaker to half open")
        self.breaker_closed = counter("kmq_worker_breaker_closed", "Transitions of the breaker to closed")
        self.breaker_state = Gauge(
            "kmq_worker_breaker_state", "Circuit breaker: 0 closed, 1 half open, 2 open", _TOPIC, registry=r
        )
        self.failure_rate = Gauge(
            "kmq_worker_failure_rate", "Failed share of handler outcomes over the breaker's window", _TOPIC, registry=r
        )
        self.in_flight = Gauge("kmq_worker_in_flight", "Messages received and not yet settled", _TOPIC, registry=r)
        self.last_progress = Gauge(
            "kmq_worker_last_progress_seconds",
            "Seconds since a message was last settled while messages were held (0 when none is held)",
            _TOPIC,
            registry=r,
        )
        self.breaker_state.labels(topic).set(0)
        # Ordered workers (key or partition ordering) only.
        self.key_wait = BulkHistogram(
            "kmq_worker_key_wait_seconds",
            "Time a message that waited behind earlier messages of its key (or partition) waited before it started",
            topic,
            (0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300),
            r,
        )
        self.keys_waiting = Gauge(
            "kmq_worker_keys_waiting",
            "Keys (or partitions) with messages waiting behind a running one",
            _TOPIC,
            registry=r,
        )
        self.partition_held = Gauge(
            "kmq_worker_partition_held",
            "Messages held per partition: running, waiting and received ahead",
            ("topic", "partition"),
            registry=r,
        )
        self.paused_partitions = Gauge(
            "kmq_worker_paused_partitions",
            "Partitions whose fetching is paused (they hold their limit)",
            _TOPIC,
            registry=r,
        )

    def add(self, tallies: dict[str, int]) -> None:
        """Add counts by attribute name (`processed`, `retried`, ...)."""
        for name, count in tallies.items():
            if count:
                counter: Counter = getattr(self, name)
                counter.labels(self.topic).inc(count)

    def ordered(self, waits_ms: list[int], keys_waiting: int, held: dict[int, int], paused: int) -> None:
        """An ordered worker's gauges and waits, once per loop turn."""
        self.key_wait.observe_all([wait_ms / 1000 for wait_ms in waits_ms])
        self.keys_waiting.labels(self.topic).set(keys_waiting)
        self.paused_partitions.labels(self.topic).set(paused)
        for partition, count in held.items():
            self.partition_held.labels(self.topic, str(partition)).set(count)

    def transition(self, transition: Transition) -> None:
        counter = {
            BreakerState.OPEN: self.breaker_opened,
            BreakerState.HALF_OPEN: self.breaker_half_opened,
            BreakerState.CLOSED: self.breaker_closed,
        }[transition.after]
        counter.labels(self.topic).inc()
        self.breaker_state.labels(self.topic).set(transition.after.level)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str) -> float:
        """A sample's current value (0 when absent), e.g. `kmq_worker_breaker_opened_total`."""
        found = self.registry.get_sample_value(name, {"topic": self.topic})
        return 0.0 if found is None else found
