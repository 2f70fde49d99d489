"""`SettleView`: the `Settlements` of one queue, read from its markers topic by a thread of its own.

Each replica reads every markers partition (assigned, not subscribed: every replica needs every note) and commits,
under group `<markers topic>__api`, the offset a restarted replica must read from: the first note still remembered
on that partition, else how far it has read. Settles wait until the view has read up to the end it found at start
(partition EOF), so a restarted replica never takes a settled receipt for a fresh one.

Partitions added to the markers topic while it runs (`kmq topics grow`) are read too: the view looks for them every
`TOPIC_CHECK_S`, and at once when a settle names a partition it does not read yet; such a settle waits until the new
partition is read up to its end, as every settle waits at start.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaMessage

from kmq.batch_markers import Run
from kmq.config import KmqConfig
from kmq.kafka import consumer_settings
from kmq.markers import MarkerKey
from kmq.receipt_notes import noted_runs
from kmq_api.settlements import HEADER, RETAIN_MS, Action, Note, Settlements

_log = logging.getLogger(__name__)
COMMIT_INTERVAL_S = 2.0
_POLL_S = 0.1
_BATCH = 1000
_COMMITTED_TIMEOUT_S = 5.0
TOPIC_CHECK_S = 10.0  # how often the view looks for partitions added to the markers topic
_KEY_BYTES = 12
# How long past its `keep_until_ms` (the latest deadline of a receipt of its delivery) a replica remembers a note, at
# the least. The tracker keeps notes ten minutes past it (RETAIN_MS), but a replica consults them only to judge its
# own settles: from the deadline on (by this replica's clock, the one it prunes by) nack and extend are refused as
# expired before any note is looked at, and a late ack writes an END that the tracker judges by its own notes, so past
# the deadline a note serves only the settles in flight (their `won`; a replica's own note is kept `margin_ms` from
# when it wrote it). Holding every note for ten minutes made a replica's RSS grow for ten minutes under a steady load:
# the 10-minute soak's long-lived replica grew from 80 to 106 MB (docs/soak/soak-10min-before-note-margin.txt).
NOTE_MARGIN_MS = 60_000
# What the view commits still follows the tracker's ten minutes: a replica whose clock runs ahead of another's prunes
# earlier, and the group's committed floor is where a restarted replica resumes. Forgotten receives are kept as the
# smallest first marker offset per partition and minute of `keep_until_ms`, a few ints, until RETAIN_MS past it.
FLOOR_BUCKET_MS = 60_000


@dataclass(frozen=True, eq=False)
class _Waiter:
    """A settle waiting, on `loop`, until every markers partition is read past its marker's offset."""

    marker_offsets: dict[int, int]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():  # else it timed out or was cancelled meanwhile
        future.set_result(None)


def resume_offsets(positions: dict[int, int], floors: dict[int, int]) -> dict[int, int]:
    """Where a restarted replica must read from, per partition read: the first note still remembered, but never past
    what was read (a note this replica wrote itself may sit beyond notes of other replicas not read yet)."""
    return {p: min(position, floors.get(p, position)) for p, position in positions.items()}


class SettleView:
    """Thread-safe: the reading thread feeds it, request handlers ask it and add their own notes at once."""

    def __init__(
        self,
        config: KmqConfig,
        partitions: int,
        on_death: Callable[[str, BaseException], None] | None = None,
        margin_ms: int = NOTE_MARGIN_MS,
    ) -> None:
        """`margin_ms`: how long past its `keep_until_ms` a note is remembered (at least NOTE_MARGIN_MS, plus what a
        settle can take from its first look at the notes to its verdict)."""
        self.topic = config.markers_topic
        self.margin_ms = max(margin_ms, NOTE_MARGIN_MS)
        self._forgotten_floors: dict[tuple[int, int], int] = {}  # (partition, minute of keep_until) -> first marker
        self.group_id = f"{config.markers_topic}__api"
        self.caught_up = threading.Event()
        self._settlements = Settlements(retain_ms=self.margin_ms)
        self._lock = threading.Lock()
        self._positions: dict[int, int] = {}
        self._at_start = frozenset(range(partitions))  # caught_up once each of these is read to its end
        self._read_to_end: set[int] = set()  # partitions read up to the end they had when the view began reading them
        self._changed = threading.Condition(self._lock)  # notified when a partition is read up to its end
        self._waiters: list[_Waiter] = []  # settles waiting until their markers are read back (`wait_past`)
        self._look_for_partitions = threading.Event()
        self._consumer = Consumer(consumer_settings(config, self.group_id, enable_partition_eof=True))
        self._partitions = partitions  # markers partitions read: 0 .. partitions - 1
        self._stopping = threading.Event()
        self._on_death = on_death  # the reading thread died on an unexpected error: settles could not be judged
        self._thread = threading.Thread(
            target=self._run_watched, name=f"kmq-api-settled-{config.queue_topic}", daemon=True
        )
        self._thread.start()

    def __len__(self) -> int:
        """Ack and nack notes remembered (a gauge of the facade's metrics)."""
        with self._lock:
            return len(self._settlements)

    def settled_by(self, key: MarkerKey, issued_at_ms: int) -> Action | None:
        with self._lock:
            return self._settlements.settled_by(key.partition, key.offset, issued_at_ms)

    def refusals(self, receipts: list[tuple[int, int, int, int]]) -> list[str | None]:
        """For each (partition, offset, issued_at_ms, receipt deadline): why a settle with it would lose as far as
        this replica has read (settled, or the receipt spent), or None."""
        with self._lock:
            return [self._settlements.refusal(*receipt) for receipt in receipts]

    def won(self, notes: list[tuple[int, int, int, int]]) -> list[bool]:
        """For each (partition, offset, issued_at_ms, marker offset): whether that note takes effect (the
        settle-once rule of kmq.receipt_notes). Final once `wait_past` has returned True for its marker offset."""
        with self._lock:
            return [self._settlements.won(*note) for note in notes]

    async def wait_past(self, marker_offsets: dict[int, int], timeout_s: float) -> bool:
        """Wait up to `timeout_s` until each markers partition has been read past the given marker offset: every
        note written before it is then known here. The reading thread wakes the waiting request on its event loop
        (one hop, no worker thread parked on a condition)."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(marker_offsets, loop, loop.create_future())
        with self._lock:
            if self._read_past(marker_offsets):
                return True
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter.future, timeout_s)
        except TimeoutError:
            return False
        finally:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        return True

    def _read_past(self, marker_offsets: dict[int, int]) -> bool:
        return all(self._positions.get(p, 0) > offset for p, offset in marker_offsets.items())

    def _wake_waiters(self) -> None:
        """Under the lock, once positions moved: resolve the futures of the requests read past now."""
        for waiter in [w for w in self._waiters if self._read_past(w.marker_offsets)]:
            self._waiters.remove(waiter)
            try:
                waiter.loop.call_soon_threadsafe(_resolve, waiter.future)
            except RuntimeError:  # its event loop has closed (the server stopped): no request waits any more
                _log.debug("a settle's event loop closed while it waited for %s", waiter.marker_offsets)

    def has_read(self, partitions: set[int]) -> bool:
        """Whether every one of `partitions` was read up to the end it had when the view began reading it, and so
        was every partition the view found at start: settles of their receipts may be judged."""
        return self.caught_up.is_set() and partitions <= self._read_to_end

    def wait_read(self, partitions: set[int], timeout_s: float) -> bool:
        """`has_read`, waiting up to `timeout_s` for it. A partition the view does not read yet (added since it
        started) makes it look for new partitions at once, not at its next periodic check."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self.has_read(partitions):
                if max(partitions, default=-1) >= self._partitions:
                    self._look_for_partitions.set()
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0:
                    return False
                self._changed.wait(min(remaining_s, _POLL_S))
            return True

    def observe(self, partition: int, runs: tuple[Run, ...], note: Note, marker_offset: int) -> None:
        """A note this replica has just written (acknowledged) on these offsets of `partition`: known at once,
        before it is read back. Kept `margin_ms` from now at least (a late ack's note is past its deadline already),
        so its settle's verdict (`won`) never finds it forgotten."""
        kept = replace(note, keep_until_ms=max(note.keep_until_ms, int(time.time() * 1000)))
        with self._lock:
            self._settlements.observe_runs(partition, runs, kept, marker_offset)

    def close(self) -> None:
        self._stopping.set()
        self._thread.join()
        try:
            self._commit()
        finally:
            self._consumer.close()

    def _assign(self) -> bool:
        """Read from where the group's commit says (the start when none): retried until it works, since a group
        coordinator just started (or moved) answers NOT_COORDINATOR for a while. True once assigned."""
        while not self._stopping.is_set():
            wanted = [TopicPartition(self.topic, p) for p in range(self._partitions)]
            try:
                committed = self._consumer.committed(wanted, timeout=_COMMITTED_TIMEOUT_S)
            except KafkaException as e:
                _log.info("reading the committed offsets of %s (retrying): %s", self.group_id, e)
                self._stopping.wait(_POLL_S)
                continue
            self._consumer.assign(
                [TopicPartition(self.topic, tp.partition, max(tp.offset, OFFSET_BEGINNING)) for tp in committed]
            )
            return True
        return False

    def _run_watched(self) -> None:
        try:
            self._run()
        except BaseException as e:
            if self._on_death is None:
                raise
            self._on_death(threading.current_thread().name, e)

    def _run(self) -> None:
        if not self._assign():
            return
        next_commit = next_topic_check = time.monotonic() + COMMIT_INTERVAL_S
        while not self._stopping.is_set():
            try:
                self._read(self._next_records())
                if time.monotonic() >= next_commit:
                    next_commit = time.monotonic() + COMMIT_INTERVAL_S
                    self._prune_and_commit()
                if self._look_for_partitions.is_set() or time.monotonic() >= next_topic_check:
                    self._look_for_partitions.clear()
                    next_topic_check = time.monotonic() + TOPIC_CHECK_S
                    self._follow_added_partitions()
            except KafkaException as e:  # the cluster's trouble: keep reading, the requests answer 503 meanwhile
                _log.warning("reading %s for settled receipts: %s", self.topic, e)
                self._stopping.wait(_POLL_S)

    def _next_records(self) -> list[KafkaMessage]:
        """What arrives within `_POLL_S`, returning at the first record (a batch consume would wait the whole
        timeout for a full batch, and a settle waiting for its own marker to be read back would wait with it)."""
        first = self._consumer.poll(_POLL_S)
        return [] if first is None else [first, *self._consumer.consume(_BATCH - 1, 0)]

    def _follow_added_partitions(self) -> None:
        """Read the partitions added to the markers topic since the view last looked, from the group's commit (from
        their start: a new partition has none). A failure is logged: the next look tries again."""
        try:
            metadata = self._consumer.list_topics(self.topic, timeout=_COMMITTED_TIMEOUT_S)
            found = metadata.topics.get(self.topic)
            count = len(found.partitions) if found is not None and found.error is None else 0
            if count <= self._partitions:
                return
            added = [TopicPartition(self.topic, p) for p in range(self._partitions, count)]
            committed = self._consumer.committed(added, timeout=_COMMITTED_TIMEOUT_S)
            self._consumer.incremental_assign(
                [TopicPartition(self.topic, tp.partition, max(tp.offset, OFFSET_BEGINNING)) for tp in committed]
            )
        except KafkaException as e:
            _log.warning("looking for partitions added to %s (tried again in %.0fs): %s", self.topic, TOPIC_CHECK_S, e)
            return
        _log.info("%s has %d partitions now (was %d): reading the new ones", self.topic, count, self._partitions)
        with self._lock:
            self._partitions = count

    def _read(self, records: list[KafkaMessage]) -> None:
        with self._lock:
            for record in records:
                error = record.error()
                if error is None:
                    self._note(record)
                elif error.code() == KafkaError._PARTITION_EOF:
                    self._at_end(record.partition() or 0)
                else:
                    _log.warning("reading %s: %s", self.topic, error.str())
            if records and self._waiters:
                self._wake_waiters()  # positions moved: settles waiting for their markers may go on

    def _note(self, record: KafkaMessage) -> None:
        partition, offset = record.partition() or 0, record.offset() or 0
        self._positions[partition] = offset + 1
        headers: list[tuple[str, bytes | None]] = record.headers() or []  # type: ignore[assignment]  # bytes values
        for name, value in headers:
            note = Note.decode(value) if name == HEADER else None
            key = record.key()
            if note is not None and isinstance(key, bytes) and len(key) == _KEY_BYTES:
                message = MarkerKey.decode(key)
                if message.partition == partition:  # else not a marker (PROTOCOL.md): nobody acts on it
                    runs = noted_runs(message.offset, record.value())
                    if runs:
                        self._settlements.observe_runs(partition, runs, note, offset)

    def _at_end(self, partition: int) -> None:
        if partition not in self._read_to_end:
            self._read_to_end.add(partition)
            self._changed.notify_all()
        if not self.caught_up.is_set() and self._at_start <= self._read_to_end:
            _log.info("%s read up to its end: settles are served", self.topic)
            self.caught_up.set()

    def _prune_and_commit(self) -> None:
        with self._lock:
            forgotten = self._settlements.forget(int(time.time() * 1000))
            kept = self._forgotten_floors
            for partition, keep_until_ms, first in forgotten:
                bucket = (partition, keep_until_ms // FLOOR_BUCKET_MS)
                kept[bucket] = min(kept.get(bucket, first), first)
        self._commit()

    def _floors(self) -> dict[int, int]:
        """Per partition, where a restarted replica must resume (with `_lock` held): the first note remembered, or
        of a receive forgotten less than RETAIN_MS past its keep_until_ms (FLOOR_BUCKET_MS)."""
        floors = self._settlements.floors()
        now_ms = int(time.time() * 1000)
        for bucket in [b for b in self._forgotten_floors if (b[1] + 1) * FLOOR_BUCKET_MS + RETAIN_MS < now_ms]:
            del self._forgotten_floors[bucket]
        for (partition, _), first in self._forgotten_floors.items():
            floors[partition] = min(floors.get(partition, first), first)
        return floors

    def _commit(self) -> None:
        with self._lock:
            floors = self._floors()
            offsets = [
                TopicPartition(self.topic, p, floors.get(p, position)) for p, position in self._positions.items()
            ]
        if offsets:
            try:
                self._consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as e:  # the next commit tries again; a restart then reads a little more
                _log.warning("committing %s positions of %s: %s", self.group_id, self.topic, e)
