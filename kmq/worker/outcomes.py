"""What a handler tells the worker by raising: `Retry` (nack, after a delay) or `Reject` (dead-letter now).

Returning normally means processed; any other exception is a retry with the configured backoff."""

from __future__ import annotations


class Retry(Exception):  # a request, not an error: `raise kmq.Retry(delay_ms=5000)`
    """Redeliver this message after `delay_ms` (None: the configured backoff by delivery count)."""

    def __init__(self, delay_ms: int | None = None) -> None:
        if delay_ms is not None and delay_ms < 0:
            raise ValueError(f"Retry delay_ms must not be negative, got {delay_ms}")
        super().__init__("retry" if delay_ms is None else f"retry after {delay_ms} ms")
        self.delay_ms = delay_ms


class Reject(Exception):  # a request, not an error: `raise kmq.Reject("bad input")`
    """Never redeliver this message: write it to the dead-letter topic with `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
