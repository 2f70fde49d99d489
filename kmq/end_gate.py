"""Holding back a message's markers until its START is acknowledged (PROTOCOL.md, "Client flow", rule "No END
before its START").

With pipelined STARTs the application may acknowledge a message before the broker has acknowledged its START. The
END (and a nack's or an extension's START) goes out on another producer, so nothing orders it after the START on
the wire: the gate does. Each received batch opens a span of queue offsets per partition; a marker for an offset
inside an open span is parked, and runs once the span's START is acknowledged. A span whose START failed for good
stays closed until a later batch of the same partition (the batch read again after the rewind) is acknowledged past
it: the old delivery's END then follows the new START, never precedes it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection

_log = logging.getLogger(__name__)
Action = Callable[..., None]


class Span:
    """Queue offsets `lo`..`hi` (inclusive) of one partition whose START is not acknowledged yet."""

    __slots__ = ("failed", "hi", "lo")

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi, self.failed = lo, hi, False


class EndGate:
    """Thread-safe. `run` is the per-marker path: without a span on the partition (the common case once STARTs are
    acknowledged) it reads one dict entry, takes no lock and runs the action at once.

    The spans of a partition are a tuple replaced whole under the lock, so a reader without the lock sees a
    consistent one. A span is added before its messages are handed over (so every marker of them sees it), and
    removed under the lock only after the markers parked on it have run, so a marker arriving meanwhile waits for
    the lock and then follows them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: dict[int, tuple[Span, ...]] = {}
        self._parked: dict[int, list[tuple[int, Action, tuple[object, ...]]]] = {}

    def open(self, partition: int, lo: int, hi: int) -> Span:
        span = Span(lo, hi)
        with self._lock:
            self._spans[partition] = (*self._spans.get(partition, ()), span)
        return span

    def run(self, partition: int, offset: int, action: Action, *args: object) -> None:
        """Run `action(*args)` now, or once the START of (partition, offset) is acknowledged."""
        spans = self._spans.get(partition)
        if spans and _covers(spans, offset):
            with self._lock:
                spans = self._spans.get(partition)
                if spans and _covers(spans, offset):
                    self._parked.setdefault(partition, []).append((offset, action, args))
                    return
        action(*args)

    def held(self, partition: int) -> list[tuple[int, int]]:
        """The offset ranges (`lo`, `hi`, inclusive) of `partition` whose START is not acknowledged, ascending (for a
        writer that tries their markers again later, without parking). Reads the spans without the lock: a span is
        published before its messages are handed over, and removed only after the markers parked on it have run."""
        spans = self._spans.get(partition)
        if not spans:
            return []
        return sorted((span.lo, span.hi) for span in spans)

    def acked(self, partition: int, span: Span) -> None:
        """The span's START is acknowledged: it closes no more, nor do the failed spans it was read again over."""
        with self._lock:
            kept = []
            for other in self._spans.get(partition, ()):
                if other is span:
                    continue
                if other.failed and other.lo <= span.hi:
                    other.lo = span.hi + 1  # (the span read again starts at the failed one's first offset)
                    if other.lo > other.hi:
                        continue
                kept.append(other)
            self._release(partition, tuple(kept))

    def failed(self, span: Span) -> None:
        """The span's START failed for good: it stays closed until a later batch is acknowledged past it."""
        with self._lock:
            span.failed = True

    def forget_failed(self, partitions: Collection[int]) -> int:
        """The group took these partitions away: their next owner reads the failed spans again and STARTs them, so
        the markers parked on those spans are dropped (the messages come again). The number dropped."""
        dropped = 0
        with self._lock:
            for partition in partitions:
                spans = self._spans.get(partition, ())
                if any(span.failed for span in spans):
                    failed = [span for span in spans if span.failed]
                    parked = self._parked.get(partition, [])
                    left = [entry for entry in parked if not _covers(failed, entry[0])]
                    dropped += len(parked) - len(left)
                    self._parked[partition] = left
                    self._release(partition, tuple(span for span in spans if not span.failed))
        return dropped

    def parked(self) -> int:
        """Markers waiting for their START."""
        with self._lock:
            return sum(len(entries) for entries in self._parked.values())

    def _release(self, partition: int, spans: tuple[Span, ...]) -> None:
        """Under the lock: run the markers no span of `spans` holds back any more, then publish `spans`."""
        parked = self._parked.get(partition)
        if parked:
            waiting = []
            for entry in parked:
                if _covers(spans, entry[0]):
                    waiting.append(entry)
                    continue
                try:
                    entry[1](*entry[2])
                except Exception:  # noqa: BLE001  # one marker's failure must not hold back its neighbours
                    _log.exception("writing a marker held back for its START failed; the message may be redelivered")
            self._parked[partition] = waiting
        if spans:
            self._spans[partition] = spans
        else:
            self._spans.pop(partition, None)


def _covers(spans: Collection[Span], offset: int) -> bool:
    for span in spans:  # noqa: SIM110  # a loop, not any(): this runs per marker while a START is in flight
        if span.lo <= offset <= span.hi:
            return True
    return False
