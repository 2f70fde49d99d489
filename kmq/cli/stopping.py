"""SIGTERM and SIGINT for the long-running commands (`kmq worker`, `kmq tracker`, `kmq api`), from their first line.

Before the service runs, a signal ends the start-up at once (the command then exits 0: nothing was taken on yet);
once it runs, the signal asks it to stop gracefully and arms the command's `StopWatch`, so that a stop the cluster
holds up (flushes, commits, leaving the group) ends within the grace period, with exit 1 and the reason logged.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from types import FrameType

from kmq.cli import _early_stop
from kmq.stop_watch import StopWatch

_log = logging.getLogger(__name__)
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopBeforeStart(BaseException):  # not an error: the command ends cleanly
    """Raised in the main thread by a signal that came before the service ran: ends the start-up."""


class Stopping:
    """Installed first thing; `running(stop)` once the service can stop gracefully (its `stop` is then called)."""

    def __init__(self, component: str, timeout_ms: int) -> None:
        self.watch = StopWatch(component, timeout_ms)
        self.requested = False
        self._stop: Callable[[int], None] | None = None
        for signum in SIGNALS:
            signal.signal(signum, self._on_signal)
        if _early_stop.received:  # noted while the command line was being imported
            self.requested = True
            self.watch.arm()
            _log.info("received %s during start-up: stopping", signal.Signals(_early_stop.received[0]).name)

    def running(self, stop: Callable[[int], None]) -> None:
        """From now on a signal calls `stop(signum)`; raises StopBeforeStart if one came already."""
        self._stop = stop
        if self.requested:
            raise StopBeforeStart

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        first = not self.requested
        self.requested = True
        self.watch.arm()
        if self._stop is None:
            _log.info("received %s during start-up: stopping", name)
            raise StopBeforeStart
        if first:
            _log.info("received %s: stopping (giving up after %d ms)", name, self.watch.timeout_ms)
        self._stop(signum)
