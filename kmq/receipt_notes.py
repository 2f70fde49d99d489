"""Which deliveries are settled: the pure state behind "a receipt settles once", for every reader of the markers
topic (the REST facade's replicas and the tracker).

Every marker the facade writes for a receipt carries a `kmq-receipt` header (`Note`): the action, the delivery's
issue time (with the marker key, it names the delivery: an extend's receipt keeps it), the deadline of the receipt
it used (with the delivery, it names the receipt) and how long the note matters (the latest deadline of a receipt
of that delivery). Markers without the header (those of library clients and of the tracker) are not notes.

The settle-once rule (issue 29). The markers partition's order is the arbiter: going through the notes on one
queue offset of one delivery in marker-offset order, a note *wins* unless an earlier winning note settled the
delivery (an ack or a nack) or spent the same receipt (any action: an extend hands out a new receipt, with a new
deadline, and spends the one it used). A winning ack or nack settles the delivery. A note that loses has no effect:
the facade answers 409 to whoever wrote it, and the tracker ignores the START or END it carries. Every reader applies
the same rule to the same records, so they all agree, whatever order they learned the notes in.

A note matters until its delivery's last deadline has passed plus `RETAIN_MS`: past its deadline a receipt can no
longer nack or extend (it is expired), and an ack then only repeats an END, which changes nothing. The notes of one
receive on one partition (one issue time) are kept and forgotten together, at the latest of their deadlines, and a
BATCH END's note is held as its runs: the state grows with marker records, not with messages.
"""

from __future__ import annotations

import bisect
import logging
import struct
from dataclasses import dataclass, field
from typing import Literal

from kmq.batch_markers import MAX_OFFSETS, BatchEnd, Run, decode_batch_marker, is_batch_value
from kmq.errors import MarkerDecodeError

_log = logging.getLogger(__name__)
Action = Literal["ack", "nack", "extend"]
HEADER = "kmq-receipt"
RETAIN_MS = 10 * 60 * 1000
_NOTE = struct.Struct(">Bqqq")
_NOTE_V1 = struct.Struct(">Bqq")  # before the receipt's deadline was in the note: an ack's or nack's is keep_until
_UNKNOWN = -(2**63)  # no receipt deadline in the note (never a deadline: receipts are issued after 1970)
_CODES: dict[Action, int] = {"ack": 0, "nack": 1, "extend": 2}
_ACTIONS: dict[int, Action] = {code: action for action, code in _CODES.items()}
Delivery = tuple[int, int, int]  # queue partition, queue offset, issued_at_ms
_LONGEST = MAX_OFFSETS + 1  # longer than any run: (offset, _LONGEST) sorts after every run starting at offset


@dataclass(frozen=True, slots=True)
class Note:
    """What a facade marker did to one delivery with one receipt, and until when that matters (epoch ms).

    `receipt_deadline_ms` names the receipt used (None: unknown, a note of an older facade's extend)."""

    action: Action
    issued_at_ms: int
    keep_until_ms: int
    receipt_deadline_ms: int | None = None

    def encode(self) -> bytes:
        receipt = _UNKNOWN if self.receipt_deadline_ms is None else self.receipt_deadline_ms
        return _NOTE.pack(_CODES[self.action], self.issued_at_ms, self.keep_until_ms, receipt)

    @staticmethod
    def decode(data: bytes | None) -> Note | None:
        """The note, or None for bytes that are not one (any producer may write headers)."""
        if data is None:
            return None
        if len(data) == _NOTE_V1.size:
            code, issued_at_ms, keep_until_ms = _NOTE_V1.unpack(data)
            action = _ACTIONS.get(code)
            receipt = None if action == "extend" else keep_until_ms
            return None if action is None else Note(action, issued_at_ms, keep_until_ms, receipt)
        if len(data) != _NOTE.size:
            return None
        code, issued_at_ms, keep_until_ms, receipt = _NOTE.unpack(data)
        action = _ACTIONS.get(code)
        known = None if receipt == _UNKNOWN else receipt
        return None if action is None else Note(action, issued_at_ms, keep_until_ms, known)


_Noted = tuple[int, Action, int | None]  # marker offset, action, the receipt's deadline


@dataclass(slots=True)
class _Receive:
    """The notes of the deliveries one receive handed out on one partition (one issue time): kept as a whole, until
    the latest of their notes no longer matters, so that memory grows with marker records rather than messages."""

    keep_until_ms: int
    first_marker_offset: int
    # notes on one offset: offset -> the notes, by marker offset
    single: dict[int, dict[int, tuple[Action, int | None]]] = field(default_factory=dict)
    # notes of BATCH ENDs: marker offset -> (action, the receipt's deadline, the runs of offsets it settles); a note
    # read back after this replica observed it is the same note
    runs: dict[int, tuple[Action, int | None, tuple[Run, ...]]] = field(default_factory=dict)

    def notes_on(self, offset: int) -> list[_Noted]:
        """Every note on `offset`, in marker order."""
        noted = [(m, action, receipt) for m, (action, receipt) in self.single.get(offset, {}).items()]
        noted += [(m, action, receipt) for m, (action, receipt, runs) in self.runs.items() if _covers(runs, offset)]
        noted.sort()
        return noted

    def winners(self, offset: int) -> list[_Noted]:
        """The notes on `offset` that take effect (the module's settle-once rule), in marker order."""
        won: list[_Noted] = []
        spent: set[int] = set()
        for noted in self.notes_on(offset):
            _, action, receipt = noted
            if receipt is not None and receipt in spent:
                continue  # this receipt was used already
            won.append(noted)
            if action != "extend":
                break  # settled: every later note loses
            if receipt is not None:
                spent.add(receipt)
        return won

    def settled_by(self, offset: int) -> Action | None:
        """The action of the winning ack or nack on `offset`, if any."""
        won = self.winners(offset)
        return won[-1][1] if won and won[-1][1] != "extend" else None


class Settlements:
    """Settle notes by (partition, issued_at_ms), each covering runs of offsets; never touches Kafka or the clock."""

    def __init__(self, retain_ms: int = RETAIN_MS) -> None:
        """`retain_ms`: how long past its `keep_until_ms` a receive's notes are remembered (the tracker's RETAIN_MS;
        a facade replica, which judges only its own settles, remembers them for less)."""
        self.retain_ms = retain_ms
        self._receives: dict[tuple[int, int], _Receive] = {}

    def __len__(self) -> int:
        """The notes remembered."""
        return sum(sum(map(len, receive.single.values())) + len(receive.runs) for receive in self._receives.values())

    def observe(self, partition: int, offset: int, note: Note, marker_offset: int) -> None:
        """A note on the message at `offset`, read at `marker_offset` of markers partition `partition` (the one
        aligned with the message's)."""
        self.observe_runs(partition, ((offset, 1),), note, marker_offset)

    def observe_runs(self, partition: int, runs: tuple[Run, ...], note: Note, marker_offset: int) -> None:
        """A note on every offset of `runs` (a BATCH END's set, ascending)."""
        receive = self._receives.get((partition, note.issued_at_ms))
        # (an extend that shortened the deadline noted the new one only: the receipt it spent lives until its own)
        keep_until_ms = max(note.keep_until_ms, note.receipt_deadline_ms or note.keep_until_ms)
        if receive is None:
            receive = self._receives[(partition, note.issued_at_ms)] = _Receive(keep_until_ms, marker_offset)
        receive.keep_until_ms = max(receive.keep_until_ms, keep_until_ms)
        receive.first_marker_offset = min(receive.first_marker_offset, marker_offset)
        if len(runs) == 1 and runs[0][1] == 1:
            receive.single.setdefault(runs[0][0], {})[marker_offset] = (note.action, note.receipt_deadline_ms)
        else:
            receive.runs.setdefault(marker_offset, (note.action, note.receipt_deadline_ms, runs))

    def refusal(self, partition: int, offset: int, issued_at_ms: int, receipt_deadline_ms: int) -> str | None:
        """Why a settle with this receipt would lose now (settled, or the receipt spent), or None."""
        receive = self._receives.get((partition, issued_at_ms))
        if receive is None:
            return None
        won = receive.winners(offset)
        if won and won[-1][1] != "extend":
            return f"already settled by {won[-1][1]}"
        if any(receipt == receipt_deadline_ms for _, _, receipt in won):
            return "already used (an extend returned the receipt to use now)"
        return None

    def won(self, partition: int, offset: int, issued_at_ms: int, marker_offset: int) -> bool:
        """Whether the note at `marker_offset` takes effect on `offset` (the settle-once rule)."""
        receive = self._receives.get((partition, issued_at_ms))
        return receive is not None and any(m == marker_offset for m, _, _ in receive.winners(offset))

    def settled_by(self, partition: int, offset: int, issued_at_ms: int) -> Action | None:
        """How the delivery was settled (ack or nack; the first note that did), or None while it is not."""
        receive = self._receives.get((partition, issued_at_ms))
        return None if receive is None else receive.settled_by(offset)

    def prune(self, now_ms: int) -> int:
        """Forget the receives whose notes no longer matter; how many were forgotten."""
        return len(self.forget(now_ms))

    def forget(self, now_ms: int) -> list[tuple[int, int, int]]:
        """`prune`, returning what each forgotten receive was: (markers partition, keep_until_ms, first marker
        offset)."""
        stale = [key for key, receive in self._receives.items() if receive.keep_until_ms + self.retain_ms < now_ms]
        return [(key[0], (r := self._receives.pop(key)).keep_until_ms, r.first_marker_offset) for key in stale]

    def floors(self) -> dict[int, int]:
        """Per markers partition with notes remembered, the smallest marker offset of one: a replica that starts
        reading there sees every note that still matters."""
        floors: dict[int, int] = {}
        for (partition, _), receive in self._receives.items():
            floors[partition] = min(floors.get(partition, receive.first_marker_offset), receive.first_marker_offset)
        return floors


def noted_runs(key_offset: int, value: bytes | None) -> tuple[Run, ...]:
    """The queue offsets a noted marker settles, as runs: its key's, or a BATCH END's set (an ack of several
    receipts of one receive). A batch value that breaks the format notes nothing, as it ends nothing."""
    if not is_batch_value(value):
        return ((key_offset, 1),)
    try:
        marker = decode_batch_marker(key_offset, value)
    except MarkerDecodeError as e:
        _log.warning("a noted batch marker that is not one, skipped: %s", e)
        return ()
    return marker.runs if isinstance(marker, BatchEnd) else ()


def _covers(runs: tuple[Run, ...], offset: int) -> bool:
    if len(runs) == 1:
        start, length = runs[0]
        return start <= offset < start + length
    index = bisect.bisect_right(runs, (offset, _LONGEST)) - 1
    return index >= 0 and runs[index][0] <= offset < runs[index][0] + runs[index][1]
