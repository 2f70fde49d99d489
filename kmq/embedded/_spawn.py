"""Starting broker processes from one long-lived thread, so that parent-death signals fire only when we die.

PR_SET_PDEATHSIG (see `_guard`) fires when the thread that forked the child exits. A broker started from a short-lived
thread (a thread pool worker, a test's helper thread) would be killed with that thread. All brokers are therefore
forked by the daemon thread below, which lives exactly as long as the process.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

Popen = subprocess.Popen[bytes]
_GUARD_SCRIPT = Path(__file__).with_name("_guard.py")
_requests: queue.SimpleQueue[tuple[Callable[[], Popen], Future[Popen]]] = queue.SimpleQueue()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def guarded(argv: Sequence[str]) -> list[str]:
    """`argv` wrapped so the program is SIGKILLed when this process dies (Linux; elsewhere unchanged)."""
    if sys.platform != "linux":
        return list(argv)
    return [sys.executable, "-I", "-S", str(_GUARD_SCRIPT), str(os.getpid()), *argv]


def spawn(argv: Sequence[str], **popen_args: Any) -> Popen:
    """`subprocess.Popen(argv, **popen_args)`, forked by the spawner thread; its errors are raised here."""
    future: Future[Popen] = Future()
    _requests.put((lambda: subprocess.Popen(list(argv), **popen_args), future))
    _ensure_thread()
    return future.result()


def _ensure_thread() -> None:
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_serve, name="kmq-broker-spawner", daemon=True)
            _thread.start()


def _serve() -> None:
    while True:
        start, future = _requests.get()
        try:
            future.set_result(start())
        except Exception as e:  # noqa: BLE001  # handed to the caller, who raises it
            future.set_exception(e)
