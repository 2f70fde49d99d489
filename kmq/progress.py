"""Stall detection: when a long-running component (worker, tracker, REST facade) last made progress while work was
waiting. Each exports it as `kmq_<component>_last_progress_seconds` and fails `/healthz` past its stall timeout, so a
supervisor (a Kubernetes liveness probe) restarts a stuck process; the first check that finds a stall logs every
thread's stack, once per stall, so that no stall is silent.

The measure, in seconds: 0 while nothing waits; while work waits, the time since the later of the last progress and
the moment the work began to wait. What counts as waiting work and as progress is each component's (see its use).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable

_log = logging.getLogger(__name__)


class ProgressWatch:
    """Progress and waiting work of one component. Thread-safe: any thread may report progress."""

    def __init__(self, component: str, stall_timeout_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.component = component
        self.stall_timeout_ms = stall_timeout_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._progress_at = clock()
        self._waiting_since: float | None = None
        self._running = 0  # units of work started and not finished (`started` / `finished`)
        self._logged = False  # the stacks of this stall are logged

    def progressed(self) -> None:
        """Work was done: a message handled, a redelivery pass settled, a request answered."""
        with self._lock:
            self._progress_at = self._clock()
            self._logged = False

    def waiting(self, yes: bool) -> None:
        """Whether work waits now (called by the component when that may have changed)."""
        with self._lock:
            if not yes:
                self._waiting_since = None
            elif self._waiting_since is None:
                self._waiting_since = self._clock()

    def started(self) -> None:
        """A unit of work (a request) began: work waits until it finishes."""
        with self._lock:
            self._running += 1
            if self._waiting_since is None:
                self._waiting_since = self._clock()

    def finished(self) -> None:
        """A unit of work ended: progress; nothing waits once none runs."""
        with self._lock:
            self._running -= 1
            self._progress_at = self._clock()
            self._logged = False
            if self._running == 0:
                self._waiting_since = None

    def last_progress_s(self) -> float:
        """0 while nothing waits; else the seconds since the later of the last progress and the wait's start."""
        with self._lock:
            if self._waiting_since is None:
                return 0.0
            return max(0.0, self._clock() - max(self._progress_at, self._waiting_since))

    def problem(self) -> str | None:
        """Why `/healthz` fails (a stall past the timeout), or None. The first call that finds a stall logs every
        thread's stack (once per stall)."""
        stalled_s = self.last_progress_s()
        if stalled_s * 1000 < self.stall_timeout_ms:
            return None
        detail = f"{self.component}: no progress for {stalled_s:.1f} s while work waits"
        with self._lock:
            log_now, self._logged = not self._logged, True
        if log_now:
            _log.error(
                "%s (stall timeout %d ms); what each thread waits on:\n%s", detail, self.stall_timeout_ms, stacks()
            )
        return detail


def stacks() -> str:
    """Every thread's stack, by name: what each is waiting on."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return "\n".join(
        f'Thread "{names.get(ident, ident)}":\n{"".join(traceback.format_stack(frame))}'
        for ident, frame in sys._current_frames().items()
    )
