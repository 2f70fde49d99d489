"""Which deliveries are settled: the pure state behind "a receipt settles once" (issue 15, item 9).

Every marker the facade writes for a receipt carries a `kmq-receipt` header: the action, the delivery's issue time
(with the marker key, it names the delivery: an extend's receipt keeps it) and how long the note matters (the
latest deadline of a receipt of that delivery). Every replica reads these notes back from the markers topic, so
what one replica settled, every replica — and a restarted one — refuses to settle again. Markers without the header
(those of library clients and of the tracker) are not notes and are ignored here.

A note matters until its delivery's last deadline has passed plus `RETAIN_MS`: past its deadline a receipt can no
longer nack or extend (it is expired), and an ack then only repeats an END, which changes nothing.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

Action = Literal["ack", "nack", "extend"]
HEADER = "kmq-receipt"
RETAIN_MS = 10 * 60 * 1000
_NOTE = struct.Struct(">Bqq")
_CODES: dict[Action, int] = {"ack": 0, "nack": 1, "extend": 2}
_ACTIONS: dict[int, Action] = {code: action for action, code in _CODES.items()}
Delivery = tuple[int, int, int]  # queue partition, queue offset, issued_at_ms


@dataclass(frozen=True, slots=True)
class Note:
    """What a facade marker did to one delivery, and until when that matters (epoch ms)."""

    action: Action
    issued_at_ms: int
    keep_until_ms: int

    def encode(self) -> bytes:
        return _NOTE.pack(_CODES[self.action], self.issued_at_ms, self.keep_until_ms)

    @staticmethod
    def decode(data: bytes | None) -> Note | None:
        """The note, or None for bytes that are not one (any producer may write headers)."""
        if data is None or len(data) != _NOTE.size:
            return None
        code, issued_at_ms, keep_until_ms = _NOTE.unpack(data)
        action = _ACTIONS.get(code)
        return None if action is None else Note(action, issued_at_ms, keep_until_ms)


@dataclass(slots=True)
class _Entry:
    settled_by: Action | None
    keep_until_ms: int
    first_marker_offset: int


class Settlements:
    """Deliveries with notes, by (partition, offset, issued_at_ms); never touches Kafka or the clock."""

    def __init__(self) -> None:
        self._entries: dict[Delivery, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def observe(self, partition: int, offset: int, note: Note, marker_offset: int) -> None:
        """A note read at `marker_offset` of markers partition `partition` (the one aligned with the message's)."""
        delivery = (partition, offset, note.issued_at_ms)
        entry = self._entries.get(delivery)
        if entry is None:
            entry = self._entries[delivery] = _Entry(None, note.keep_until_ms, marker_offset)
        entry.keep_until_ms = max(entry.keep_until_ms, note.keep_until_ms)
        entry.first_marker_offset = min(entry.first_marker_offset, marker_offset)
        if note.action != "extend" and entry.settled_by is None:
            entry.settled_by = note.action

    def settled_by(self, partition: int, offset: int, issued_at_ms: int) -> Action | None:
        """How the delivery was settled (ack or nack), or None while it is not."""
        entry = self._entries.get((partition, offset, issued_at_ms))
        return None if entry is None else entry.settled_by

    def prune(self, now_ms: int) -> int:
        """Forget the deliveries whose notes no longer matter; how many were forgotten."""
        stale = [d for d, e in self._entries.items() if e.keep_until_ms + RETAIN_MS < now_ms]
        for delivery in stale:
            del self._entries[delivery]
        return len(stale)

    def floor(self, partition: int) -> int | None:
        """The smallest marker offset of a note still remembered on this markers partition (None: none is): a
        replica that starts reading there sees every note that still matters."""
        offsets = [e.first_marker_offset for (p, _, _), e in self._entries.items() if p == partition]
        return min(offsets, default=None)
