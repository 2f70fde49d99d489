"""One owned markers partition: its pending set, how far it has been read, and the catch-up guard.

Pure like `PendingSet`: it takes marker records and `now_ms` and answers what is due; the Kafka I/O is elsewhere.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kmq.batch_markers import BatchMarker, BatchStart, Run, decode_batch_marker, is_batch_value, runs_of
from kmq.errors import MarkerDecodeError
from kmq.markers import EndMarker, Marker, MarkerKey, StartMarker, decode_marker
from kmq.receipt_notes import Note, Settlements, noted_runs
from kmq_tracker.mixed_pending import MixedPending
from kmq_tracker.pacing import Backoff

_log = logging.getLogger(__name__)
_KEY = struct.Struct(">iq")  # PROTOCOL.md: int32 queue partition, int64 queue offset
_START = struct.Struct(">bq")  # type byte 0x01, int64 redeliver_after_ms
_START_TYPE = 1
_END = EndMarker().encode()


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    """A snapshot of one owned partition, safe to hand to other threads."""

    partition: int
    pending: int
    caught_up: bool
    position: int | None
    first_offset: int | None
    undecodable: int
    redelivering: int = 0  # messages in a redelivery pass not settled yet (their ENDs may be read already)


class PartitionState:
    """Markers partition p of `topic` (and with it queue partition p), as read since it was assigned.

    Catch-up guard (PROTOCOL.md, Tracker): nothing is due until the partition has been read up to the end it had
    when it was assigned. That end is the high watermark of the first fetch after the assignment (the caller passes
    it with `observe_end`), or an end-of-partition event (`reached_end`) says so directly.

    Lag guard: a START is due only once the partition has been read through its deadline — up to a marker stamped
    at or after it, or to the partition's end at or after it. An END written before the deadline is then read
    already, so a tracker that lags behind its markers does not redeliver messages whose END it has not read. Being
    at the end (`at_end`) is judged by the high watermark the consumer cached from its last fetch response, which
    stays as it was while the partition's leader does not answer (cut off, paused): it only makes a START a
    candidate. A pass whose deadlines no marker read vouches for (`end_to_confirm`) first asks the end afresh, and
    copies only what markers vouch for if the end lies past the position read (kmq_tracker.workers); once reading
    gets to that end, the probe's send time is read through (`await_end`).
    With read_committed (transactional mode) reading stops at the last stable offset: a transaction a crashed client
    left open holds the partition's redeliveries back until the broker aborts it (transaction.timeout.ms).
    """

    def __init__(self, topic: str, partition: int, backoff: Backoff, pending: MixedPending | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.backoff = backoff
        self.pending = pending if pending is not None else MixedPending()
        self.position: int | None = None  # the next marker offset to read, once known
        self.first_offset: int | None = None  # the first record read since assignment (where reading resumed)
        self.catch_up_target: int | None = None
        self.caught_up = False
        self.undecodable = 0
        self.read_through_ms = 0  # every marker stamped up to this time has been read
        self.at_end = False  # the read position was at the partition's end at the last poll
        # (end, broker time the fetch was sent) of a probe that found markers past the position: once read to that
        # end, everything written before the fetch was sent is read (`await_end`)
        self.awaited: tuple[int, int] | None = None
        self.notes = Settlements()  # the facade's settle notes read here (the settle-once rule, kmq.receipt_notes)
        self.lost_settles = 0  # offsets of facade settles that lost to an earlier one: ignored
        # Pending STARTs settled by an END read once caught up (the ENDs read while catching up after an assignment
        # were mostly counted by the previous owner), not yet taken into the metrics: the acknowledged rate.
        self.settled = 0
        # The offsets of the redelivery pass running on the partition: their ENDs, read back before the pass is
        # settled, are the tracker's own (a copy or dead letter written), not acknowledgements.
        self.in_pass: frozenset[int] = frozenset()

    def apply(self, marker_offset: int, timestamp_ms: int, key: bytes | None, value: bytes | None) -> bool:
        """Apply one record of the markers partition; False (counted, logged once) when it is not a marker."""
        # The hot path of ingestion (>= 100 000 markers/s): the kmq.markers layouts read in place, without building
        # the value objects. A property test holds it to `MarkerKey.decode`/`decode_marker`, which also explain,
        # on the slow path, why a record is not a marker. Batch markers take the slow path: one per batch.
        if key is not None and value is not None and len(key) == _KEY.size:
            partition, queue_offset = _KEY.unpack(key)
            if partition == self.partition:
                if timestamp_ms > self.read_through_ms:
                    self.read_through_ms = timestamp_ms
                if len(value) == _START.size and value[0] == _START_TYPE:
                    self.pending.start(queue_offset, marker_offset, timestamp_ms + _START.unpack(value)[1])
                    self._advance(marker_offset + 1)
                    return True
                if value == _END:
                    if self.pending.end(queue_offset) and self.caught_up and queue_offset not in self.in_pass:
                        self.settled += 1
                    self._advance(marker_offset + 1)
                    return True
        self.read_through_ms = max(self.read_through_ms, timestamp_ms)
        return self._apply_checked(marker_offset, timestamp_ms, key, value)

    def apply_noted(
        self, marker_offset: int, timestamp_ms: int, key: bytes | None, value: bytes | None, note: bytes | None
    ) -> bool:
        """`apply` for a record with a `kmq-receipt` header (the facade's settles): it takes effect only on the
        offsets where its note wins (kmq.receipt_notes); where another settle of the delivery or receipt came first,
        its START or END is ignored, as the facade answered 409 to whoever wrote it."""
        decoded = Note.decode(note)
        if decoded is None or key is None or len(key) != _KEY.size:
            return self.apply(marker_offset, timestamp_ms, key, value)
        partition, queue_offset = _KEY.unpack(key)
        runs = noted_runs(queue_offset, value) if partition == self.partition else ()
        if not runs:  # not a marker: counted and skipped by `apply`
            return self.apply(marker_offset, timestamp_ms, key, value)
        self.notes.observe_runs(partition, runs, decoded, marker_offset)
        offsets = [offset for start, length in runs for offset in range(start, start + length)]
        won = [o for o in offsets if self.notes.won(partition, o, decoded.issued_at_ms, marker_offset)]
        if len(won) == len(offsets):
            return self.apply(marker_offset, timestamp_ms, key, value)
        self.lost_settles += len(offsets) - len(won)
        if won:  # a BATCH END whose note won on some of its offsets only
            runs = runs_of(won)
            own = self._own_pending(runs)
            self._settled(self.pending.batch_end(runs) - own)
        self._advance(marker_offset + 1)
        return True

    def forget_notes(self, now_ms: int) -> None:
        """Drop the settle notes that no longer matter (their deliveries' deadlines long past)."""
        self.notes.prune(now_ms)

    def observe_position(self, high_watermark: int) -> None:
        """After each poll: whether reading is at the partition's end by the high watermark cached from the last
        fetch response (possibly an old one: see the class's lag guard)."""
        self.at_end = self.position is not None and 0 <= high_watermark <= self.position

    def observe_end(self, high_watermark: int) -> None:
        """The high watermark seen by the first fetch after assignment: the end to catch up to."""
        if self.catch_up_target is None and high_watermark >= 0:
            self.catch_up_target = high_watermark
            self._check_caught_up()

    def reached_end(self, end_offset: int) -> None:
        """An end-of-partition event: everything up to `end_offset` has been read."""
        self.position = max(end_offset, self.position or 0)
        self.caught_up = True
        self.at_end = True
        self._check_awaited(self.position)

    def due(self, now_ms: int, limit: int) -> list[int]:
        """Queue offsets due for redelivery (by deadline), none before the partition has caught up, and none whose
        deadline lies past what has been read (the lag guard), unless the cached end says reading is at the end:
        those a pass confirms first (`end_to_confirm`)."""
        if not self.caught_up or not self.backoff.ready(now_ms):
            return []
        return self.pending.due(now_ms if self._at_end() else min(now_ms, self.read_through_ms), limit)

    def _at_end(self) -> bool:
        """At the end by the cached high watermark, unless a probe found markers past the position, still unread."""
        return self.at_end and self.awaited is None

    def await_end(self, end: int, sent_ms: int) -> None:
        """A fetch sent at broker time `sent_ms` found the partition's end at `end`: every marker written before
        then lies below it, so once read up to it, the partition is read through `sent_ms`."""
        if self.position is not None and self.position >= end:
            self.read_through_ms = max(self.read_through_ms, sent_ms)
        elif self.awaited is None or self.awaited[0] <= end:
            self.awaited = (end, sent_ms)

    def end_to_confirm(self, deadlines: Sequence[int | None]) -> int | None:
        """For a pass over offsets with `deadlines`: the read position, when some deadline lies past every marker
        read (due only by `at_end`, which must then be confirmed by a fresh look at the partition's end); else
        None."""
        if any(deadline is not None and deadline > self.read_through_ms for deadline in deadlines):
            return self.position
        return None

    def next_wake_ms(self) -> int | None:
        """When this partition next has work: its earliest deadline, or the end of a retry backoff."""
        if not self.caught_up:
            return None
        deadline = self.pending.next_deadline_ms()
        if deadline is None or (deadline > self.read_through_ms and not self._at_end()):
            return None  # lagging: the next records read (the caller's poll returns at the first) move it on
        return max(deadline, self.backoff.retry_at_ms)

    def done(self, queue_offset: int) -> int | None:
        """The copy or dead letter is acknowledged: forget the key; returns the deadline it had."""
        deadline = self.pending.deadline_of(queue_offset)
        self.pending.end(queue_offset)
        return deadline

    def deadlines_of(self, queue_offsets: Sequence[int]) -> list[int | None]:
        """The deadline of each pending offset (None for one not pending), in order."""
        return [self.pending.deadline_of(offset) for offset in queue_offsets]

    def done_all(self, queue_offsets: Sequence[int]) -> list[int | None]:
        """`done` for many offsets at once (a pass's): forgotten as runs, which costs one cut per run of the
        pending set instead of one per offset; returns their deadlines, in order."""
        deadlines = self.deadlines_of(queue_offsets)
        if queue_offsets:
            self.pending.batch_end(runs_of(queue_offsets))
        return deadlines

    def status(self) -> PartitionStatus:
        return PartitionStatus(
            self.partition,
            len(self.pending),
            self.caught_up,
            self.position,
            self.first_offset,
            self.undecodable,
            len(self.in_pass),
        )

    def commit_offset(self) -> int | None:
        """The markers offset to commit: the oldest pending START, else the read position (None before any read)."""
        if self.position is None:
            return None
        # Not past a settle note that still matters: a restarted replica must see it to judge the later ones.
        floor = self.notes.floors().get(self.partition, self.position)
        return min(self.pending.commit_offset(self.position), floor)

    def overdue_ms(self, now_ms: int) -> int:
        """How long the earliest pending deadline has passed; 0 when nothing is due."""
        deadline = self.pending.next_deadline_ms()
        return 0 if deadline is None else max(0, now_ms - deadline)

    def _apply_checked(self, marker_offset: int, timestamp_ms: int, key: bytes | None, value: bytes | None) -> bool:
        try:
            marker_key, marker = _decode(key, value, self.partition)
        except MarkerDecodeError as e:
            self._skip(marker_offset, e)
            return False
        if isinstance(marker, StartMarker):
            self.pending.start(marker_key.offset, marker_offset, timestamp_ms + marker.redeliver_after_ms)
        elif isinstance(marker, BatchStart):
            self.pending.batch_start(marker.runs, marker_offset, timestamp_ms + marker.redeliver_after_ms)
        elif isinstance(marker, EndMarker):
            ended = self.pending.end(marker_key.offset)
            self._settled(1 if ended and marker_key.offset not in self.in_pass else 0)
        else:
            own = self._own_pending(marker.runs)
            self._settled(self.pending.batch_end(marker.runs) - own)
        self._advance(marker_offset + 1)
        return True

    def take_settled(self) -> int:
        """The deliveries settled since the last call (for the metrics)."""
        settled, self.settled = self.settled, 0
        return settled

    def _own_pending(self, runs: Sequence[Run]) -> int:
        """How many offsets of `runs` are pending and in the running pass (their ENDs are the tracker's own)."""
        if not self.in_pass:
            return 0
        return sum(1 for o in self.in_pass if o in self.pending and any(s <= o < s + n for s, n in runs))

    def _settled(self, count: int) -> None:
        if self.caught_up:
            self.settled += count

    def _advance(self, position: int) -> None:
        """A record was read: the position moves past it."""
        if self.first_offset is None:
            self.first_offset = position - 1
        self.position = position
        if not self.caught_up:
            self._check_caught_up()
        if self.awaited is not None:
            self._check_awaited(position)

    def _check_awaited(self, position: int) -> None:
        if self.awaited is not None and position >= self.awaited[0]:
            self.read_through_ms = max(self.read_through_ms, self.awaited[1])
            self.awaited = None

    def _check_caught_up(self) -> None:
        target, position = self.catch_up_target, self.position
        if target is not None and position is not None and position >= target:
            self.caught_up = True

    def _skip(self, marker_offset: int, error: MarkerDecodeError) -> None:
        self.undecodable += 1
        if self.undecodable == 1:
            _log.warning(
                "skipping a record that is not a kmq marker at %s[%d]@%d: %s (further ones on this partition are "
                "only counted, in kmq_undecodable_markers_total)",
                self.topic,
                self.partition,
                marker_offset,
                error,
            )
        self._advance(marker_offset + 1)


def _decode(key: bytes | None, value: bytes | None, partition: int) -> tuple[MarkerKey, Marker | BatchMarker]:
    marker_key = MarkerKey.decode(key)
    marker = decode_batch_marker(marker_key.offset, value) if is_batch_value(value) else decode_marker(value)
    if marker_key.partition != partition:
        raise MarkerDecodeError(f"marker for queue partition {marker_key.partition} on markers partition {partition}")
    return marker_key, marker
