"""`Sample`: one look at a queue's offsets, the unit of the overview's history (kept in memory and on a topic)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sample:
    at_ms: int
    backlog: int
    written: int  # sum of the queue topic's end offsets
    received: int  # sum of the worker group's committed offsets
    dead_lettered: int  # sum of the dead-letter topic's end offsets
    # Totals of the trackers' counters of the queue (kmq_settled_deliveries, kmq_redelivered_messages) as the
    # console accumulates them; None when not known at this sample (no tracker configured, one did not answer).
    acknowledged: int | None = None
    redelivered: int | None = None
