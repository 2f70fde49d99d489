"""Which deliveries are settled: the pure state behind "a receipt settles once" (issue 15, item 9).

Every marker the facade writes for a receipt carries a `kmq-receipt` header: the action, the delivery's issue time
(with the marker key, it names the delivery: an extend's receipt keeps it) and how long the note matters (the
latest deadline of a receipt of that delivery). Every replica reads these notes back from the markers topic, so
what one replica settled, every replica — and a restarted one — refuses to settle again. Markers without the header
(those of library clients and of the tracker) are not notes and are ignored here.

A note matters until its delivery's last deadline has passed plus `RETAIN_MS`: past its deadline a receipt can no
longer nack or extend (it is expired), and an ack then only repeats an END, which changes nothing. The notes of one
receive on one partition (one issue time) are kept and forgotten together, at the latest of their deadlines, and a
BATCH END's note is held as its runs: the state grows with marker records, not with messages, so pruning it and
finding where a restarted replica resumes stay cheap at thousands of acks per second.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field
from typing import Literal

from kmq.batch_markers import MAX_OFFSETS, Run

Action = Literal["ack", "nack", "extend"]
HEADER = "kmq-receipt"
RETAIN_MS = 10 * 60 * 1000
_NOTE = struct.Struct(">Bqq")
_CODES: dict[Action, int] = {"ack": 0, "nack": 1, "extend": 2}
_ACTIONS: dict[int, Action] = {code: action for action, code in _CODES.items()}
Delivery = tuple[int, int, int]  # queue partition, queue offset, issued_at_ms
_LONGEST = MAX_OFFSETS + 1  # longer than any run: (offset, _LONGEST) sorts after every run starting at offset


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
class _Receive:
    """The notes of the deliveries one receive handed out on one partition (one issue time): kept as a whole, until
    the latest of their notes no longer matters, so that memory grows with marker records rather than messages."""

    keep_until_ms: int
    first_marker_offset: int
    # ack and nack notes on one offset: offset -> (marker offset, action), the earliest note kept
    single: dict[int, tuple[int, Action]] = field(default_factory=dict)
    # ack notes of BATCH ENDs: marker offset -> (action, the runs of offsets it settles); a note read back after
    # this replica observed it is the same note
    runs: dict[int, tuple[Action, tuple[Run, ...]]] = field(default_factory=dict)

    def settled_by(self, offset: int) -> Action | None:
        """The action of the earliest ack or nack note on `offset`, if any."""
        first = self.single.get(offset)
        for marker_offset, (action, runs) in self.runs.items():
            if (first is None or marker_offset < first[0]) and _covers(runs, offset):
                first = (marker_offset, action)
        return None if first is None else first[1]


class Settlements:
    """Settle notes by (partition, issued_at_ms), each covering runs of offsets; never touches Kafka or the clock."""

    def __init__(self) -> None:
        self._receives: dict[tuple[int, int], _Receive] = {}

    def __len__(self) -> int:
        """The ack and nack notes remembered."""
        return sum(len(receive.single) + len(receive.runs) for receive in self._receives.values())

    def observe(self, partition: int, offset: int, note: Note, marker_offset: int) -> None:
        """A note on the message at `offset`, read at `marker_offset` of markers partition `partition` (the one
        aligned with the message's)."""
        self.observe_runs(partition, ((offset, 1),), note, marker_offset)

    def observe_runs(self, partition: int, runs: tuple[Run, ...], note: Note, marker_offset: int) -> None:
        """A note on every offset of `runs` (a BATCH END's set, ascending)."""
        receive = self._receives.get((partition, note.issued_at_ms))
        if receive is None:
            receive = self._receives[(partition, note.issued_at_ms)] = _Receive(note.keep_until_ms, marker_offset)
        receive.keep_until_ms = max(receive.keep_until_ms, note.keep_until_ms)
        receive.first_marker_offset = min(receive.first_marker_offset, marker_offset)
        if note.action == "extend":
            return
        if len(runs) == 1 and runs[0][1] == 1:
            offset = runs[0][0]
            earlier = receive.single.get(offset)
            if earlier is None or marker_offset < earlier[0]:
                receive.single[offset] = (marker_offset, note.action)
        else:
            receive.runs.setdefault(marker_offset, (note.action, runs))

    def settled_by(self, partition: int, offset: int, issued_at_ms: int) -> Action | None:
        """How the delivery was settled (ack or nack; the first note that did), or None while it is not."""
        receive = self._receives.get((partition, issued_at_ms))
        return None if receive is None else receive.settled_by(offset)

    def prune(self, now_ms: int) -> int:
        """Forget the receives whose notes no longer matter; how many were forgotten."""
        stale = [key for key, receive in self._receives.items() if receive.keep_until_ms + RETAIN_MS < now_ms]
        for key in stale:
            del self._receives[key]
        return len(stale)

    def floors(self) -> dict[int, int]:
        """Per markers partition with notes remembered, the smallest marker offset of one: a replica that starts
        reading there sees every note that still matters."""
        floors: dict[int, int] = {}
        for (partition, _), receive in self._receives.items():
            floors[partition] = min(floors.get(partition, receive.first_marker_offset), receive.first_marker_offset)
        return floors


def _covers(runs: tuple[Run, ...], offset: int) -> bool:
    if len(runs) == 1:
        start, length = runs[0]
        return start <= offset < start + length
    index = bisect.bisect_right(runs, (offset, _LONGEST)) - 1
    return index >= 0 and runs[index][0] <= offset < runs[index][0] + runs[index][1]
