"""SIGTERM/SIGINT caught from the first moment of a service command (`kmq worker`, `kmq tracker`, `kmq api`).

Importing the command line takes a while (typer, confluent-kafka, FastAPI); a signal in that time would kill the
process by the signal's default action. Installed before those imports, this only notes the signal: the command's
`Stopping` (kmq.cli.stopping) takes it over and ends the start-up cleanly. Other commands keep Python's defaults.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

SERVICES = frozenset({"worker", "tracker", "api"})
received: list[int] = []


def _note(signum: int, frame: FrameType | None) -> None:
    received.append(signum)


def install() -> None:
    """When this process runs a service command (and this is its main thread)."""
    if sys.argv[1:2] and sys.argv[1] in SERVICES and threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, _note)
