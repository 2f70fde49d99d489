"""`StopWatch`: a stop that cannot run past its deadline (issue 29).

A service asked to stop flushes, commits and leaves its consumer group; with the cluster unreachable, librdkafka would
keep retrying those for minutes, past the supervisor's grace period (Kubernetes' `terminationGracePeriodSeconds`),
and the process would end by SIGKILL with nothing said. Armed when the stop begins, the watch gives up at its
deadline: it logs what the stop was still doing (so, what was dropped) and ends the process with exit code 1.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

_log = logging.getLogger(__name__)
GAVE_UP_EXIT_CODE = 1


class StopWatch:
    """`arm()` once the stop begins (idempotent, safe from a signal handler); `step` names what the stop is doing."""

    def __init__(self, component: str, timeout_ms: int, exit: Callable[[int], None] = os._exit) -> None:
        self.component = component
        self.timeout_ms = timeout_ms
        self.step = "stopping"
        self._exit = exit
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def arm(self) -> None:
        with self._lock:
            if self._timer is None:
                self._timer = threading.Timer(self.timeout_ms / 1000, self._give_up)
                self._timer.name = f"{self.component}-stop-watch"
                self._timer.daemon = True
                self._timer.start()

    def disarm(self) -> None:
        """The stop finished in time."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()

    def _give_up(self) -> None:
        _log.critical(
            "%s did not stop within %d ms (is Kafka reachable?): given up while %s; what that step had not written "
            "or committed is dropped (unacknowledged messages come back after their deadline); exiting %d",
            self.component,
            self.timeout_ms,
            self.step,
            GAVE_UP_EXIT_CODE,
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        self._exit(GAVE_UP_EXIT_CODE)
