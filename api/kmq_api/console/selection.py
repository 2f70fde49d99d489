"""The dead-letter page's filters and selections (pure: no Kafka)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from kmq.dlq import DeadLetter


@dataclass(frozen=True, slots=True)
class Filters:
    """Every filter set must match. `key`: a substring of the key; `header`: `name` or `name=value` (exact);
    `since`, `until`: ISO times (UTC unless they say otherwise) of the dead letter, inclusive."""

    reason: str = ""
    key: str = ""
    header: str = ""
    since: str = ""
    until: str = ""
    pending: bool = False

    def matches(self, dead: DeadLetter) -> bool:
        since_ms, until_ms = parse_time_ms(self.since), parse_time_ms(self.until)
        return (
            self.reason in dead.reason
            and (not self.key or self.key in (dead.key or b"").decode(errors="replace"))
            and (not self.header or self._header_matches(dead))
            and (since_ms is None or dead.dead_lettered_ms >= since_ms)
            and (until_ms is None or dead.dead_lettered_ms <= until_ms)
            and not (self.pending and dead.redriven)
        )

    @property
    def selects_all(self) -> bool:
        return not (self.reason or self.key or self.header or self.since or self.until)

    def _header_matches(self, dead: DeadLetter) -> bool:
        name, has_value, value = self.header.partition("=")
        for found, data in dead.headers:
            if found == name and (not has_value or (data or b"").decode(errors="replace") == value):
                return True
        return False


@dataclass(frozen=True, slots=True)
class Picked:
    """The dead letters ticked on the page, by (partition, offset) of the dead-letter topic."""

    positions: frozenset[tuple[int, int]]

    @classmethod
    def parse(cls, picks: list[str]) -> Picked:
        """`"partition:offset"` each; anything else is not a pick (ValueError)."""
        positions = set()
        for pick in picks:
            partition, _, offset = pick.partition(":")
            positions.add((int(partition), int(offset)))
        return cls(frozenset(positions))

    def matches(self, dead: DeadLetter) -> bool:
        return (dead.partition, dead.offset) in self.positions


def parse_time_ms(text: str) -> int | None:
    """Milliseconds since the epoch of an ISO time (UTC when it names no zone); None for an empty text."""
    if not text.strip():
        return None
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
