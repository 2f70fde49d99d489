"""Watching, while the tracker runs, that the queue and markers topics keep the same partition count.

Partitions can be added to a live queue (`kmq topics grow` adds them to both topics, markers first). Added to one
topic only, messages of the new queue partitions have no markers partition: their STARTs fail (the clients raise
and re-read them) and this tracker could never redeliver them. That is reported here, not silently mis-tracked.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PartitionCounts:
    queue: int
    markers: int

    @property
    def aligned(self) -> bool:
        return self.queue == self.markers


class AlignmentWatch:
    """Remembers the last counts seen; logs each change of alignment once (an error while misaligned)."""

    def __init__(self, queue_topic: str, markers_topic: str) -> None:
        self._topics = (queue_topic, markers_topic)
        self._last: PartitionCounts | None = None

    def observe(self, counts: PartitionCounts) -> bool:
        """Record `counts`; True when they are aligned."""
        if counts != self._last:
            queue, markers = self._topics
            if not counts.aligned:
                _log.error(
                    "%s has %d partitions but %s has %d: messages of the partitions one of them lacks cannot be "
                    "tracked; add partitions to both with `kmq topics grow --partitions N`",
                    queue, counts.queue, markers, counts.markers,
                )  # fmt: skip
            elif self._last is not None:
                _log.info("%s and %s have %d partitions each", queue, markers, counts.queue)
            self._last = counts
        return counts.aligned
