"""`Message`: what the application receives from the queue."""

from __future__ import annotations

from dataclasses import dataclass, field

from kmq.headers import Headers
from kmq.markers import MarkerKey


@dataclass(frozen=True, slots=True)
class Message:
    """One delivery of a queue message; `deadline_ms` is when the tracker redelivers it unless acknowledged."""

    value: bytes | None
    key: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    redelivery_count: int
    deadline_ms: int
    headers: Headers = field(default_factory=list)

    @property
    def marker_key(self) -> MarkerKey:
        return MarkerKey(self.partition, self.offset)
