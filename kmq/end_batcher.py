"""Gathering `processed()` acknowledgements into BATCH END markers (PROTOCOL.md, "Batch markers", who writes what).

No acknowledgement waits longer than `end_flush_ms` after `processed()` returns, whatever the application does next:
a background thread writes what was gathered half that time after the first acknowledgement of a round (the other
half absorbs scheduling delays on a busy machine), and `flush()` writes everything at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from kmq.batch_markers import Run, runs_of, split_runs

_log = logging.getLogger(__name__)
WriteEnd = Callable[[int, tuple[Run, ...]], None]  # (queue partition, runs) -> produce one BATCH END


class EndBatcher:
    """Thread-safe: `add` from any thread; one daemon thread writes, started with the first acknowledgement."""

    def __init__(self, write: WriteEnd, end_flush_ms: int, name: str = "kmq-batch-ends") -> None:
        self._write = write
        self._wait_s = end_flush_ms / 2000
        self._name = name
        self._acks: dict[int, list[int]] = {}
        self._first_at: float | None = None  # monotonic time of the oldest acknowledgement not yet written
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._writing = threading.Lock()  # held while a round is taken and written: flush() waits for it
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, partition: int, offset: int) -> None:
        """One acknowledgement (the per-message path of `processed()`)."""
        with self._lock:
            acks = self._acks.get(partition)
            if acks is None:
                self._acks[partition] = [offset]
            else:
                acks.append(offset)
            if self._first_at is None:
                self._arm()

    def add_many(self, acks: Iterable[tuple[int, int]]) -> None:
        """Many (partition, offset) acknowledgements under one lock."""
        with self._lock:
            gathered = self._acks
            for partition, offset in acks:
                try:
                    gathered[partition].append(offset)
                except KeyError:
                    gathered[partition] = [offset]
            if self._first_at is None and gathered:
                self._arm()

    def flush(self) -> None:
        """Write every acknowledgement gathered so far, now."""
        with self._writing:
            self._write_round(self._take())

    def close(self) -> None:
        """Write what is gathered and stop the thread. Idempotent."""
        with self._lock:
            self._closed = True
            self._wake.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self.flush()

    def _arm(self) -> None:
        """The first acknowledgement of a round (lock held): note the time, make sure the writer thread runs."""
        self._first_at = time.monotonic()
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._closed and (wait_s := self._until_due_s()) != 0.0:
                    self._wake.wait(wait_s)
                if self._closed:
                    return
            try:
                self.flush()
            except Exception:  # noqa: BLE001  # a failed round must not end the thread: the next acks would wait forever
                _log.exception("writing BATCH END markers failed; the messages may be redelivered")

    def _until_due_s(self) -> float | None:
        """Seconds until the round is due (lock held): None when nothing is gathered, 0.0 when due."""
        if self._first_at is None:
            return None
        return max(0.0, self._first_at + self._wait_s - time.monotonic())

    def _take(self) -> dict[int, list[int]]:
        with self._lock:
            taken, self._acks, self._first_at = self._acks, {}, None
        return taken

    def _write_round(self, taken: dict[int, list[int]]) -> None:
        for partition, offsets in taken.items():
            for runs in split_runs(runs_of(offsets)):
                self._write(partition, runs)
