"""Gathering `processed()` acknowledgements into BATCH END markers (PROTOCOL.md, "Batch markers", who writes what).

No acknowledgement waits longer than `end_flush_ms` after `processed()` returns (with pipelined STARTs: after its
START is acknowledged too, whichever comes later), whatever the application does next: a background thread writes
what was gathered every half of that time (the other half absorbs scheduling delays on a busy machine), and `flush()`
writes everything at once.
"""

from __future__ import annotations

import logging
import operator
import threading
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat

from kmq.batch_markers import Run, runs_of, split_runs

_log = logging.getLogger(__name__)
WriteEnd = Callable[[int, tuple[Run, ...]], None]  # (queue partition, runs) -> produce one BATCH END
Hold = Callable[[int], list[tuple[int, int]]]  # queue partition -> (lo, hi) offset ranges whose START is in flight
# An acknowledgement is held as one int, `partition << PARTITION_SHIFT | offset` (a Kafka offset is below 2**63): an
# int is not tracked by the garbage collector, where a (partition, offset) tuple is. Tuples waiting up to
# `end_flush_ms` in the queue outlived the young generations by the thousand and set off full collections (measured:
# ~0.7 µs of the receiving thread's CPU per message, `kmq bench` kmq-batch); and sorted ints group by partition in C.
PARTITION_SHIFT = 63
_PARTITION, _OFFSET = operator.attrgetter("partition"), operator.attrgetter("offset")  # a Message or a MarkerKey


def packed(targets: Sequence[object]) -> Iterator[int]:
    """The acknowledgements of `targets` (anything with `partition` and `offset`), each packed as `add_ack` takes
    them, computed in C (`map`) rather than by a loop in Python: `processed_many` runs this for every message."""
    shifted = map(operator.lshift, map(_PARTITION, targets), repeat(PARTITION_SHIFT))
    return map(operator.or_, shifted, map(_OFFSET, targets))


class EndBatcher:
    """Thread-safe: `add` from any thread; one daemon thread writes.

    `add_ack` is the per-message path of `processed()`, so it takes no lock: it appends an acknowledgement packed into
    one int (`PARTITION_SHIFT`) to a deque (atomic), and the writer thread, waking every `end_flush_ms / 2`, drains
    what is there and writes it. `flush()` drains and writes at once.
    """

    def __init__(
        self, write: WriteEnd, end_flush_ms: int, name: str = "kmq-batch-ends", hold: Hold | None = None
    ) -> None:
        self._write = write
        self._hold = hold  # pipelined STARTs: acks of a START not acknowledged yet wait for a later round
        self._interval_s = end_flush_ms / 2000
        self._acks: deque[int] = deque()
        self.add_ack = self._acks.append  # partition << PARTITION_SHIFT | offset: the bound method, per message
        self._writing = threading.Lock()  # one round at a time, so flush() returns only once all is written
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, partition: int, offset: int) -> None:
        """One acknowledgement."""
        self._acks.append(partition << PARTITION_SHIFT | offset)

    def add_many(self, acks: Iterable[int]) -> None:
        """Many acknowledgements, each packed as `add_ack` takes them."""
        self._acks.extend(acks)

    def flush(self) -> None:
        """Write every acknowledgement added so far, now."""
        with self._writing:
            self._write_round(self._take())

    def close(self) -> None:
        """Stop the thread and write what is gathered. Idempotent."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.flush()
            except Exception:  # noqa: BLE001  # a failed round must not end the thread: later acks would wait forever
                _log.exception("writing BATCH END markers failed; the messages may be redelivered")

    def _take(self) -> list[int]:
        """Drain the acknowledgements there now (later ones wait for the next round), sorted: by partition, then
        offset. Each step runs in C (popleft called by `map`, not by a Python loop): this is per message."""
        taken = list(map(operator.call, repeat(self._acks.popleft, len(self._acks))))
        taken.sort()
        return taken

    def _write_round(self, taken: list[int]) -> None:
        start = 0
        while start < len(taken):
            partition = taken[start] >> PARTITION_SHIFT
            base = partition << PARTITION_SHIFT
            end = bisect_left(taken, base + (1 << PARTITION_SHIFT), start)
            packed = taken[start:end]
            start = end
            if self._hold is not None and not self._released(partition, base, packed):
                continue
            for runs in split_runs(runs_of(packed)):  # packed runs: the offsets' runs, each start plus `base`
                self._write(partition, tuple((first - base, length) for first, length in runs))

    def _released(self, partition: int, base: int, packed: list[int]) -> bool:
        """Pipelined STARTs: put back in the queue the acks whose START is not acknowledged, behind what came
        meanwhile (their order does not matter); `packed` (sorted) keeps the rest. Cut by range, not by ack: in a busy
        round most of a partition's acks may wait. False when nothing is left to write."""
        assert self._hold is not None
        ranges = sorted(self._hold(partition))  # ascending by `lo`, which the cut below relies on (a few ranges)
        if not ranges:
            return True
        released: list[int] = []
        cut = 0  # packed[:cut] is sorted out
        for lo, hi in ranges:
            first = bisect_left(packed, base + lo, cut)
            cut, last = bisect_right(packed, base + hi, first), cut
            released += packed[last:first]
            self._acks.extend(packed[first:cut])
        released += packed[cut:]
        packed[:] = released
        return bool(packed)
