"""`WorkerConfig`: how a `Worker` runs its handler (the queue itself is the `KmqConfig`)."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from kmq.settings import FrozenConfig
from kmq.worker.ordering import Ordering


class WorkerConfig(FrozenConfig):
    """Concurrency, lease extension, circuit breaker and shutdown settings of a worker. Times in ms.

    `lease_margin_ms` and `lease_extension_ms` of 0 derive from the queue's `msg_timeout_ms` (a third of it, and all
    of it)."""

    concurrency: int = Field(8, ge=1, description="handlers running at once")
    prefetch: int = Field(0, ge=0, description="messages received ahead of the handlers (0: 4 x concurrency)")
    max_processing_ms: int = Field(
        300_000, gt=0, description="longest a message is kept (extended) from its receipt; then it counts as failed"
    )
    lease_margin_ms: int = Field(0, ge=0, description="extend a lease this long before it expires (0: timeout / 3)")
    lease_extension_ms: int = Field(0, ge=0, description="each extension gives this much time (0: msg_timeout_ms)")
    breaker_window_ms: int = Field(10_000, gt=0, description="window over which the failure rate is measured")
    breaker_threshold: float = Field(0.5, gt=0.0, le=1.0, description="failure rate that opens the breaker")
    breaker_min_calls: int = Field(20, ge=1, description="outcomes in the window before the rate counts")
    breaker_backoff_ms: int = Field(1_000, gt=0, description="first pause after the breaker opens")
    breaker_backoff_max_ms: int = Field(60_000, gt=0, description="longest pause (it doubles on each failed probe)")
    breaker_probes: int = Field(3, ge=1, description="messages let through to probe a half-open breaker")
    shutdown_grace_ms: int = Field(30_000, ge=0, description="how long in-flight handlers may finish on shutdown")
    poll_timeout_ms: int = Field(100, gt=0, description="longest wait of one receive")
    stall_timeout_ms: int = Field(
        60_000,
        gt=0,
        description="/healthz fails when no message was settled this long while messages were held (breaker closed)",
    )
    ordering: Ordering = Field(
        Ordering.NONE, description="none: any order; partition: one at a time per partition; key: one at a time per key"
    )
    partition_limit: int = Field(
        0, ge=0, description="ordered workers: messages held per partition before its fetching pauses (0: capacity / 2)"
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.breaker_backoff_max_ms < self.breaker_backoff_ms:
            raise ValueError("breaker_backoff_max_ms must be at least breaker_backoff_ms")
        return self

    @property
    def capacity(self) -> int:
        """Messages held at once: running plus received ahead."""
        return self.concurrency + (self.prefetch or 4 * self.concurrency)

    @property
    def held_per_partition(self) -> int:
        """Most messages an ordered worker holds of one partition: running, waiting and prefetched."""
        return self.partition_limit or max(1, self.capacity // 2)

    def margin_ms(self, msg_timeout_ms: int) -> int:
        return self.lease_margin_ms or max(1, msg_timeout_ms // 3)

    def extension_ms(self, msg_timeout_ms: int) -> int:
        return self.lease_extension_ms or msg_timeout_ms
