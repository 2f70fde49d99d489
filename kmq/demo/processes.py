"""Child processes of the demo: started in their own session, logged to files, always stopped.

Each child runs in a session of its own, so a Ctrl-C in the terminal reaches only `kmq demo`, which then stops the
children in order (workers first, the broker last). On Linux the kernel also SIGKILLs each child should `kmq demo`
die without cleaning up (e.g. SIGKILL): they start like the embedded broker, through `kmq.embedded`'s guard.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kmq.embedded._spawn import guarded, spawn
from kmq.errors import DemoError

_log = logging.getLogger(__name__)
LOG_TAIL_LINES = 20


@dataclass(eq=False)
class Child:
    """One child process; `stdin_pipe` children stop when their stdin closes, the others on SIGTERM."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    stopping: bool = False

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as e:
            return f"(no log: {e})"
        return "\n".join(text.splitlines()[-lines:])

    def request_stop(self) -> None:
        """Ask politely: close stdin (the demo's workers) or send SIGTERM (services)."""
        self.stopping = True
        if not self.running():
            return
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        else:
            self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        self.process.wait()

    def _signal(self, signum: int) -> None:
        # The whole session: a child's own children go too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)


class Children:
    """Every process the demo started, stopped in reverse order of start."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._children: list[Child] = []

    def spawn(self, name: str, args: Sequence[str], env: Mapping[str, str], stdin_pipe: bool = False) -> Child:
        log_path = self.log_dir / f"{name}.log"
        with log_path.open("wb") as log:
            process = spawn(
                guarded([sys.executable, *args]),
                stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                start_new_session=True,
            )
        child = Child(name, process, log_path)
        self._children.append(child)
        _log.info("started %s (pid %d), log %s", name, process.pid, log_path)
        return child

    def check(self, children: Sequence[Child] | None = None) -> None:
        """Raise DemoError naming the first child that exited unasked, with the end of its log."""
        for child in children if children is not None else self._children:
            code = child.process.poll()
            if code is not None and not child.stopping:
                raise DemoError(f"{child.name} exited with code {code}; end of {child.log_path}:\n{child.log_tail()}")

    def stop(self, children: Sequence[Child], timeout_s: float) -> list[Child]:
        """Stop these children (politely, then SIGKILL at the deadline); those that had to be killed."""
        for child in children:
            child.request_stop()
        deadline = time.monotonic() + timeout_s
        killed = []
        for child in children:
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _log.warning("%s did not stop within %.0fs: killing it", child.name, timeout_s)
                child.kill()
                killed.append(child)
            if child.process.stdin is not None:
                child.process.stdin.close()
        return killed

    def stop_all(self, timeout_s: float) -> list[Child]:
        """Stop every child still running, the last started first."""
        running = [child for child in reversed(self._children) if child.running()]
        return self.stop(running, timeout_s)

    @property
    def pids(self) -> list[int]:
        return [child.process.pid for child in self._children]
