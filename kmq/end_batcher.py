"""Gathering `processed()` acknowledgements into BATCH END markers (PROTOCOL.md, "Batch markers", who writes what).

No acknowledgement waits longer than `end_flush_ms` after `processed()` returns (with pipelined STARTs: after its
START is acknowledged too, whichever comes later), whatever the application does next: a background thread writes
what was gathered every half of that time (the other half absorbs scheduling delays on a busy machine), and `flush()`
writes everything at once.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable

from kmq.batch_markers import Run, runs_of, split_runs

_log = logging.getLogger(__name__)
WriteEnd = Callable[[int, tuple[Run, ...]], None]  # (queue partition, runs) -> produce one BATCH END
Hold = Callable[[int, list[int]], list[int]]  # (queue partition, offsets) -> those whose START is not acknowledged


class EndBatcher:
    """Thread-safe: `add` from any thread; one daemon thread writes.

    `add` is the per-message path of `processed()`, so it takes no lock: it appends to a deque (atomic), and the writer
    thread, waking every `end_flush_ms / 2`, drains what is there and writes it. `flush()` drains and writes at once.
    """

    def __init__(
        self, write: WriteEnd, end_flush_ms: int, name: str = "kmq-batch-ends", hold: Hold | None = None
    ) -> None:
        self._write = write
        self._hold = hold  # pipelined STARTs: acks of a START not acknowledged yet wait for a later round
        self._interval_s = end_flush_ms / 2000
        self._acks: deque[tuple[int, int]] = deque()
        self.add_ack = self._acks.append  # (partition, offset): the bound method, for the per-message path
        self._writing = threading.Lock()  # one round at a time, so flush() returns only once all is written
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, partition: int, offset: int) -> None:
        """One acknowledgement."""
        self._acks.append((partition, offset))

    def add_many(self, acks: Iterable[tuple[int, int]]) -> None:
        """Many (partition, offset) acknowledgements."""
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

    def _take(self) -> dict[int, list[int]]:
        """Drain the acknowledgements there now (later ones wait for the next round), by partition."""
        acks = self._acks
        taken = [acks.popleft() for _ in range(len(acks))]
        by_partition: dict[int, list[int]] = {}
        for partition, offset in taken:
            try:
                by_partition[partition].append(offset)
            except KeyError:
                by_partition[partition] = [offset]
        return by_partition

    def _write_round(self, taken: dict[int, list[int]]) -> None:
        for partition, offsets in taken.items():
            if self._hold is not None:
                held = self._hold(partition, offsets)
                if held:  # back in the queue, behind what came meanwhile (the order of acks does not matter)
                    self._acks.extend((partition, offset) for offset in held)
                    waiting = set(held)
                    offsets = [offset for offset in offsets if offset not in waiting]
                    if not offsets:
                        continue
            for runs in split_runs(runs_of(offsets)):
                self._write(partition, runs)
