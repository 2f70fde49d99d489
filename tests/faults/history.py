"""A history of a queue under faults, and its checker: every confirmed send, hand-out, handler run and confirmed ack.

Clients append events to JSON-lines files (one per process or thread: a single writer each); `History.load` reads
them back and `check` judges one fault's messages. Pure: no Kafka, no clock of its own (times are the recorders'
`time.time()`, one machine's clock).

What counts:
- lost: a message whose send was confirmed (acks=all) and whose ack was never confirmed;
- duplicates: handler runs beyond a message's first;
- runs after a confirmed ack: a duplicate the protocol forbids unless something explains it. Two things do:
  - a late ack: the ack of the hand-out was confirmed after that hand-out's deadline, so the tracker could
    redeliver the message before the END reached it (`late`);
  - a re-read during the fault: the same queue record (partition, offset) handed out again because an offset commit
    did not get through while the network was faulty (`reread`; only from the fault's start on);
  - an expired hand-out: some hand-out of the message, to any client, reached its deadline before the first ack was
    confirmed, so the tracker could copy it then; the copy may run after another client's ack (`expired`);
  anything else is `unexplained`, and the fault tests assert there is none.
- resume: how long after the fault's end the first ack was confirmed (the workers took up work again), and the same
  for each client that had acknowledged some of the fault's messages before its end (`resume_by`; `not_resumed`
  names those that acknowledged none after it).
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

KINDS = ("send", "handout", "run", "ack")


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    n: int
    t: float
    by: str = ""
    partition: int = -1
    offset: int = -1
    deadline: float = 0.0  # a hand-out's (and its ack's) deadline before redelivery, epoch seconds

    def to_json(self) -> str:
        return json.dumps({k: getattr(self, k) for k in self.__slots__})

    @staticmethod
    def from_json(line: str) -> Event:
        fields: dict[str, Any] = json.loads(line)
        if fields.get("kind") not in KINDS:
            raise ValueError(f"not a history event: {line!r}")
        return Event(**fields)


class Recorder:
    """Appends events to one file, a line each, flushed at once (read while the run goes on); thread-safe."""

    def __init__(self, path: Path, by: str) -> None:
        self.by = by
        self._file: TextIO = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def record(self, kind: str, n: int, **where: Any) -> None:
        self.record_all(kind, [(n, where)])

    def record_all(self, kind: str, events: list[tuple[int, dict[str, Any]]]) -> None:
        """`record` for many numbers (each with its `where`), written and flushed in one go rather than a line and a
        flush each (a kill leaves at most the last line torn)."""
        now = time.time()
        lines = "".join(Event(kind, n, now, self.by, **where).to_json() + "\n" for n, where in events)
        with self._lock:
            self._file.write(lines)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


@dataclass(frozen=True)
class AfterAck:
    n: int
    run_t: float
    ack_t: float
    why: str  # late, reread or unexplained


@dataclass(frozen=True)
class Verdict:
    sent: int
    acked: int
    lost: list[int]
    duplicates: int
    after_ack: list[AfterAck]
    resume_s: float | None  # None: no ack confirmed after the fault's end
    resume_by: dict[str, float | None] = field(default_factory=dict)  # each client that acked before the fault ends

    @property
    def not_resumed(self) -> list[str]:
        """Clients that acked some of these messages before the fault's end and none after it."""
        return sorted(by for by, resumed in self.resume_by.items() if resumed is None)

    @property
    def unexplained(self) -> list[AfterAck]:
        return [a for a in self.after_ack if a.why == "unexplained"]

    def counts(self) -> dict[str, int]:
        explained: dict[str, int] = defaultdict(int)
        for a in self.after_ack:
            explained[a.why] += 1
        return dict(explained)

    def summary(self) -> str:
        resume = "never" if self.resume_s is None else f"{self.resume_s:.1f} s"
        each = ", ".join(f"{by} {'never' if s is None else f'{s:.1f} s'}" for by, s in sorted(self.resume_by.items()))
        after = ", ".join(f"{why} {count}" for why, count in sorted(self.counts().items())) or "none"
        return (
            f"sent {self.sent}, acked {self.acked}, lost {len(self.lost)}, duplicates {self.duplicates}, "
            f"runs after a confirmed ack: {after}; first ack {resume} after the fault ({each or 'no client'})"
        )


@dataclass
class History:
    events: list[Event] = field(default_factory=list)

    @staticmethod
    def load(paths: Iterable[Path]) -> History:
        events: list[Event] = []
        for path in paths:
            with path.open(encoding="utf-8") as lines:
                # A process killed mid-write leaves at most its last line torn: it is not an event.
                events.extend(Event.from_json(line) for line in lines if line.endswith("\n"))
        return History(sorted(events, key=lambda e: e.t))

    def acked(self, numbers: range) -> int:
        return len({e.n for e in self.events if e.kind == "ack" and e.n in numbers})

    def check(self, numbers: range, fault_start: float, fault_end: float) -> Verdict:
        """The verdict on the messages numbered `numbers` (those a fault's sender sent) for a fault that lasted from
        `fault_start` to `fault_end`."""
        mine = [e for e in self.events if e.n in numbers]
        sent = {e.n for e in mine if e.kind == "send"}
        # Each message's earliest hand-out deadline, over all its hand-outs: the HTTP client records a hand-out when
        # the response reaches it, which a fault can delay past later hand-outs to others and their runs.
        expiry: dict[int, float] = {}
        for e in mine:
            if e.kind == "handout" and e.deadline:
                expiry[e.n] = min(expiry.get(e.n, e.deadline), e.deadline)
        first_ack: dict[int, Event] = {}
        runs: dict[int, int] = defaultdict(int)
        seen: set[tuple[int, int]] = set()
        handout_of: dict[tuple[str, int], Event] = {}  # the latest hand-out of a message to each client
        after: list[AfterAck] = []
        for event in mine:  # in time order
            if event.kind == "handout":
                reread = (event.partition, event.offset) in seen
                seen.add((event.partition, event.offset))
                handout_of[event.by, event.n] = event if not reread else _mark_reread(event)
            elif event.kind == "run":
                runs[event.n] += 1
                acked = first_ack.get(event.n)
                if acked is not None:
                    handout = handout_of.get((event.by, event.n))
                    why = _why(acked, handout, fault_start, expiry.get(event.n), event.t)
                    after.append(AfterAck(event.n, event.t, acked.t, why))
            elif event.kind == "ack":
                first_ack.setdefault(event.n, event)
        resumed = [e.t for e in mine if e.kind == "ack" and e.t >= fault_end]
        resume_by: dict[str, float | None] = {e.by: None for e in mine if e.kind == "ack" and e.t < fault_end}
        for e in mine:
            if e.kind == "ack" and e.t >= fault_end and e.by in resume_by and resume_by[e.by] is None:
                resume_by[e.by] = e.t - fault_end
        return Verdict(
            sent=len(sent),
            acked=len(sent & first_ack.keys()),
            lost=sorted(sent - first_ack.keys()),
            duplicates=sum(count - 1 for count in runs.values() if count > 1),
            after_ack=after,
            resume_s=min(resumed) - fault_end if resumed else None,
            resume_by=resume_by,
        )


_REREAD = -2  # a hand-out's `partition` field once it is known to be a re-read (kept apart from real partitions)


def _mark_reread(event: Event) -> Event:
    return Event(event.kind, event.n, event.t, event.by, _REREAD, event.offset, event.deadline)


def _why(acked: Event, handout: Event | None, fault_start: float, expiry: float | None, run_t: float) -> str:
    if acked.deadline and acked.t > acked.deadline:
        return "late"
    if handout is not None and handout.partition == _REREAD and handout.t >= fault_start:
        return "reread"
    if expiry is not None and expiry < acked.t and expiry < run_t:
        return "expired"
    return "unexplained"
