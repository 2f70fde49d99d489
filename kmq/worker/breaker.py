"""`CircuitBreaker`: stops a worker from receiving while its downstream fails (pure: takes `now_ms`, no clock).

closed --(failure rate over the window > threshold, with enough outcomes)--> open
open --(backoff elapsed)--> half_open: `probes` messages are let through
half_open --(every probe succeeded)--> closed;  --(a probe failed)--> open, the backoff doubled up to its ceiling
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum

_BUCKETS = 10


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"

    @property
    def level(self) -> int:
        """The value of the state gauge: 0 closed, 1 half open, 2 open."""
        return {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}[self]


@dataclass(frozen=True, slots=True)
class Transition:
    """One change of state, for the log line and the metrics."""

    before: BreakerState
    after: BreakerState
    at_ms: int
    failure_rate: float
    backoff_ms: int  # the pause that starts now (open), else 0


class CircuitBreaker:
    """Failure rate over a sliding window of `window_ms`, kept in 10 buckets (O(1) per outcome)."""

    def __init__(
        self,
        window_ms: int,
        threshold: float,
        min_calls: int,
        backoff_ms: int,
        backoff_max_ms: int,
        probes: int,
    ) -> None:
        self.window_ms, self.threshold, self.min_calls = window_ms, threshold, min_calls
        self.backoff_ms, self.backoff_max_ms, self.probes = backoff_ms, backoff_max_ms, probes
        self._bucket_ms = max(1, window_ms // _BUCKETS)
        self._buckets: deque[list[int]] = deque()  # [bucket start, successes, failures], oldest first
        self.state = BreakerState.CLOSED
        self.opens = 0  # consecutive opens: the backoff doubles with each
        self.reopen_at_ms = 0
        self._probes_sent = 0
        self._probes_ok = 0

    def record(self, ok: bool, now_ms: int) -> Transition | None:
        """One handler outcome (a downstream success or failure)."""
        if self.state is BreakerState.HALF_OPEN:
            if not ok:
                return self._open(now_ms)
            self._probes_ok += 1
            return self._close(now_ms) if self._probes_ok >= self.probes else None
        self._count(ok, now_ms)
        if self.state is BreakerState.CLOSED and not ok:
            total, failures = self._totals(now_ms)
            if total >= self.min_calls and failures / total > self.threshold:
                return self._open(now_ms)
        return None

    def record_successes(self, count: int, now_ms: int) -> None:
        """`count` successes at once (closed: they only enter the window)."""
        if self.state is BreakerState.CLOSED:
            self._count(True, now_ms, count)
            return
        for _ in range(count):
            self.record(True, now_ms)

    def poll(self, now_ms: int) -> Transition | None:
        """Open → half open once the backoff has elapsed."""
        if self.state is BreakerState.OPEN and now_ms >= self.reopen_at_ms:
            self._probes_sent = self._probes_ok = 0
            return self._move(BreakerState.HALF_OPEN, now_ms, 0)
        return None

    def permits(self) -> int | None:
        """Messages that may start now: None (no limit) when closed, 0 when open, the probes left when half open."""
        if self.state is BreakerState.CLOSED:
            return None
        if self.state is BreakerState.OPEN:
            return 0
        return max(0, self.probes - self._probes_sent)

    def probing(self, count: int) -> None:
        """`count` probe messages were let through (half open)."""
        self._probes_sent += count

    def failure_rate(self, now_ms: int) -> float:
        total, failures = self._totals(now_ms)
        return failures / total if total else 0.0

    def _open(self, now_ms: int) -> Transition:
        self.opens += 1
        pause_ms = min(self.backoff_max_ms, self.backoff_ms << min(self.opens - 1, 32))
        self.reopen_at_ms = now_ms + pause_ms
        return self._move(BreakerState.OPEN, now_ms, pause_ms)

    def _close(self, now_ms: int) -> Transition:
        self.opens = 0
        transition = self._move(BreakerState.CLOSED, now_ms, 0)
        self._buckets.clear()  # a fresh window: the outage's failures must not trip it again
        return transition

    def _move(self, state: BreakerState, now_ms: int, backoff_ms: int) -> Transition:
        transition = Transition(self.state, state, now_ms, self.failure_rate(now_ms), backoff_ms)
        self.state = state
        return transition

    def _count(self, ok: bool, now_ms: int, count: int = 1) -> None:
        start = now_ms - now_ms % self._bucket_ms
        if not self._buckets or self._buckets[-1][0] != start:
            self._buckets.append([start, 0, 0])
            self._expire(now_ms)
        self._buckets[-1][1 if ok else 2] += count

    def _expire(self, now_ms: int) -> None:
        while self._buckets and self._buckets[0][0] <= now_ms - self.window_ms:
            self._buckets.popleft()

    def _totals(self, now_ms: int) -> tuple[int, int]:
        self._expire(now_ms)
        successes = sum(bucket[1] for bucket in self._buckets)
        failures = sum(bucket[2] for bucket in self._buckets)
        return successes + failures, failures
