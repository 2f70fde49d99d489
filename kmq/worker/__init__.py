"""The worker runtime: a handler per message, bounded concurrency, automatic lease extension, a circuit breaker
and graceful shutdown (docs/workers.md)."""

from __future__ import annotations

from kmq.worker.breaker import BreakerState, CircuitBreaker, Transition
from kmq.worker.config import WorkerConfig
from kmq.worker.leases import Due, LeaseSchedule
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.ordering import OrderedLanes, Ordering
from kmq.worker.outcomes import Reject, Retry
from kmq.worker.runtime import Worker

__all__ = [
    "BreakerState",
    "CircuitBreaker",
    "Due",
    "LeaseSchedule",
    "OrderedLanes",
    "Ordering",
    "Reject",
    "Retry",
    "Transition",
    "Worker",
    "WorkerConfig",
    "WorkerMetrics",
]
