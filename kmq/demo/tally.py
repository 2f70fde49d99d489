"""`Tally`: what the topics say about a demo run, fed record by record; `Verdict`: its summary.

Pure (no Kafka, no clock): the observer feeds it the queue, results and dead-letter records it reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from kmq import headers as h
from kmq.demo.numbers import decode_number
from kmq.headers import Header

LOST_SAMPLE_SIZE = 10


@dataclass(frozen=True, slots=True)
class Verdict:
    """The summary of a run, computed from the topics: `lost` must be 0."""

    expected: int
    sent: int
    processed: int
    duplicates: int
    redelivered: int
    dead_lettered: int
    dead_reasons: tuple[tuple[str, int], ...]
    lost: int
    lost_sample: tuple[int, ...]

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.sent == self.expected


@dataclass(eq=False)
class Tally:
    """Distinct message numbers seen on each topic, and the counts around them."""

    originals: set[int] = field(default_factory=set)
    redelivered: int = 0
    processed: set[int] = field(default_factory=set)
    processed_records: int = 0
    dead: dict[int, str] = field(default_factory=dict)
    foreign: int = 0

    def add_queued(self, value: bytes | None, headers: Sequence[Header]) -> None:
        """A record of the queue topic: an original, or a redelivered copy (it carries the redelivery count)."""
        if h.get(headers, h.REDELIVERY_COUNT) is not None:
            self.redelivered += 1
        elif (number := self._number(value)) is not None:
            self.originals.add(number)

    def add_processed(self, value: bytes | None) -> None:
        """A record of the results topic: a worker processed this number (once more)."""
        if (number := self._number(value)) is not None:
            self.processed.add(number)
            self.processed_records += 1

    def add_dead(self, value: bytes | None, headers: Sequence[Header]) -> None:
        """A record of the dead-letter topic, with its reason."""
        if (number := self._number(value)) is not None:
            reason = h.get(headers, h.DLQ_REASON)
            self.dead[number] = reason.decode(errors="replace") if reason else "(no reason)"

    @property
    def accounted(self) -> int:
        """Sent numbers that were processed or dead-lettered."""
        return len(self.originals & (self.processed | self.dead.keys()))

    @property
    def in_flight(self) -> int:
        return len(self.originals) - self.accounted

    def all_accounted(self, expected: int) -> bool:
        return len(self.originals) == expected and self.accounted == expected

    def verdict(self, expected: int) -> Verdict:
        """Lost: numbers 1..expected neither processed nor dead-lettered (sent or not: the producer had them acked)."""
        done = self.processed | self.dead.keys()
        lost = sorted(n for n in range(1, expected + 1) if n not in done)
        reasons = Counter(self.dead.values())
        return Verdict(
            expected=expected,
            sent=len(self.originals),
            processed=len(self.processed),
            duplicates=self.processed_records - len(self.processed),
            redelivered=self.redelivered,
            dead_lettered=len(self.dead),
            dead_reasons=tuple(sorted(reasons.items())),
            lost=len(lost),
            lost_sample=tuple(lost[:LOST_SAMPLE_SIZE]),
        )

    def _number(self, value: bytes | None) -> int | None:
        number = decode_number(value)
        if number is None:
            self.foreign += 1
        return number
