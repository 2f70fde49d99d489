"""Turns on one consumer handle: the receiving thread's `consume()` never starves another thread's call.

confluent-kafka serialises the calls on a client handle: a call made while another thread is inside `consume()`
waits, sleeping in slices, until that call returns. The receiving loop calls `consume()` again at once, so the waiting
call rarely finds the handle free: measured, a commit (the START pipeline's asynchronous ones, and a `flush()`'s
synchronous one from another thread) waited 15 to 60 s behind a worker's receiving loop.

So the receiving thread consumes in slices of at most `SLICE_S`, each taken only when no other call waits; any other
call takes its turn between two slices. Once a burst of records ends, the slices start short and grow to `SLICE_S`
(`FIRST_IDLE_SLICE_S`). A call made from inside a slice (a rebalance callback that commits) runs at
once: it is the thread that holds the turn.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

SLICE_S = 0.1  # the longest another call waits for the receiving thread's consume() (plus its own run)
# Right after a consume found records, the next empty slices are short, then double up to SLICE_S: the calls that
# come at the end of a burst (the commit of its last offsets, a flush, a close) wait a few ms, not a whole slice,
# and an idle consumer is back to SLICE_S after a handful of slices.
FIRST_IDLE_SLICE_S = 0.004


class ConsumerTurns:
    """Who may call into the consumer now: one thread at a time, other calls before the next consume slice."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._holder: int | None = None  # the thread inside a call (its ident)
        self._waiting = 0  # calls other than consume waiting for their turn

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """A call other than consume (commit, close): it goes before the receiving thread's next slice."""
        me = threading.get_ident()
        if self._holder == me:  # from inside this thread's own turn (a callback of consume)
            yield
            return
        with self._changed:
            self._waiting += 1
            try:
                while self._holder is not None:
                    self._changed.wait()
            finally:
                self._waiting -= 1
            self._holder = me
        try:
            yield
        finally:
            self._release()

    @contextlib.contextmanager
    def consume(self) -> Iterator[None]:
        """One consume slice (at most `SLICE_S`), once no other call waits for the handle."""
        me = threading.get_ident()
        with self._changed:
            while self._holder is not None or self._waiting:
                self._changed.wait()
            self._holder = me
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        with self._changed:
            self._holder = None
            self._changed.notify_all()
