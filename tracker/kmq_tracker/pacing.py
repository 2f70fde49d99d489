"""Pure pacing of redeliveries: a token bucket (rate limit) and an exponential backoff. Time comes in as `now_ms`."""

from __future__ import annotations


class TokenBucket:
    """At most `rate_per_s` tokens a second, bursts up to `burst`; starts full."""

    def __init__(self, rate_per_s: float, burst: int, now_ms: int) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate_per_s must be positive and burst at least 1")
        self._rate_per_ms = rate_per_s / 1000
        self._burst = burst
        self._tokens = float(burst)
        self._updated_ms = now_ms

    def available(self, now_ms: int) -> int:
        """Whole tokens that may be taken now."""
        self._refill(now_ms)
        return int(self._tokens)

    def take(self, count: int, now_ms: int) -> None:
        self._refill(now_ms)
        self._tokens -= count

    def next_token_ms(self, now_ms: int) -> int:
        """When at least one whole token is available (now, if one already is)."""
        self._refill(now_ms)
        missing = 1 - self._tokens
        return now_ms if missing <= 0 else now_ms + int(missing / self._rate_per_ms) + 1

    def _refill(self, now_ms: int) -> None:
        elapsed = max(0, now_ms - self._updated_ms)
        self._tokens = min(float(self._burst), self._tokens + elapsed * self._rate_per_ms)
        self._updated_ms = max(self._updated_ms, now_ms)


class Backoff:
    """Exponential backoff after failures: `base_ms`, doubling up to `max_ms`; a success resets it."""

    def __init__(self, base_ms: int, max_ms: int) -> None:
        self._base_ms = base_ms
        self._max_ms = max_ms
        self._failures = 0
        self.retry_at_ms = 0

    @property
    def failures(self) -> int:
        return self._failures

    def failed(self, now_ms: int) -> int:
        """Record a failure; returns the time before which nothing should be retried."""
        delay_ms = min(self._max_ms, self._base_ms << min(self._failures, 30))
        self._failures += 1
        self.retry_at_ms = now_ms + delay_ms
        return self.retry_at_ms

    def succeeded(self) -> None:
        self._failures = 0
        self.retry_at_ms = 0

    def ready(self, now_ms: int) -> bool:
        return now_ms >= self.retry_at_ms
