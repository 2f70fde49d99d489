"""One broker child process: its output drained by threads (the tail kept for error messages), stopped for sure."""

from __future__ import annotations

import contextlib
import logging
import queue
import re
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from kmq.embedded._spawn import Popen, guarded, spawn
from kmq.errors import EmbeddedBrokerError

_log = logging.getLogger(__name__)
TAIL_LINES = 40
_READER_JOIN_S = 2.0
_LineSink = Callable[[str | None], None]
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class ChildProcess:
    """A child in its own session (a terminal's Ctrl-C reaches only us), SIGKILLed by the kernel if we die.

    With `control=True` its stdin and stdout are a line protocol (`send`, `receive`) and stderr is its log;
    otherwise stdout and stderr together are its log. Closing stdin is how a controlled child learns to stop.
    """

    def __init__(
        self, name: str, argv: Sequence[str], control: bool = False, env: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        try:
            self._process: Popen = spawn(
                guarded(argv),
                stdin=subprocess.PIPE if control else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if control else subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        except OSError as e:
            raise EmbeddedBrokerError(f"could not start {name} ({' '.join(argv)}): {e}") from e
        log_stream = self._process.stderr if control else self._process.stdout
        self._readers = [self._drain(log_stream, self._keep)]
        if control:
            self._readers.append(self._drain(self._process.stdout, self._lines.put))

    @property
    def pid(self) -> int:
        return self._process.pid

    def running(self) -> bool:
        return self._process.poll() is None

    def exit_code(self) -> int | None:
        return self._process.poll()

    def output_tail(self) -> str:
        """The last lines the child logged (for error messages)."""
        return "\n".join(self._tail) or "(no output)"

    def send(self, line: str) -> None:
        stdin = self._process.stdin
        assert stdin is not None, "send() needs a child started with control=True"
        stdin.write(line.encode() + b"\n")
        stdin.flush()

    def receive(self, timeout_ms: int) -> str | None:
        """The next line of the control channel; None on timeout or once the child closed its stdout."""
        try:
            return self._lines.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            return None

    def stop(self, timeout_ms: int, polite: signal.Signals = signal.SIGTERM) -> int:
        """Close stdin and send `polite`; SIGKILL if still alive after `timeout_ms`; reap. Returns the exit code."""
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        self._signal(polite)
        try:
            code = self._process.wait(timeout_ms / 1000)
        except subprocess.TimeoutExpired:
            _log.warning("%s (pid %d) ignored %s for %d ms; killing it", self.name, self.pid, polite.name, timeout_ms)
            self._signal(signal.SIGKILL)
            code = self._process.wait()
        for reader in self._readers:
            reader.join(_READER_JOIN_S)
        return code

    def _signal(self, signum: int) -> None:
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signum)

    def _keep(self, line: str | None) -> None:
        if line is not None:
            self._tail.append(line)
            _log.debug("%s: %s", self.name, line)

    def _drain(self, stream: IO[bytes] | None, sink: _LineSink) -> threading.Thread:
        assert stream is not None
        thread = threading.Thread(target=_read_lines, args=(stream, sink), name=f"{self.name}-output", daemon=True)
        thread.start()
        return thread


def _read_lines(stream: IO[bytes], sink: _LineSink) -> None:
    with stream:
        for raw in stream:
            sink(_ANSI_ESCAPE.sub("", raw.decode(errors="replace").rstrip("\r\n")))
    sink(None)


class InMemoryBroker:
    """What the in-memory backends (tansu, mock) share: one child process, nothing on disk to keep or remove."""

    stop_signal = signal.SIGTERM
    _child: ChildProcess | None = None

    @property
    def child(self) -> ChildProcess | None:
        return self._child

    def stop_process(self, timeout_ms: int, keep_data: bool) -> int:
        """Stop the child (`stop_signal`, SIGKILL after `timeout_ms`); its data is gone with it, `keep_data` or not."""
        return self._child.stop(timeout_ms, self.stop_signal) if self._child is not None else 0

    def output_tail(self) -> str:
        return self._child.output_tail() if self._child is not None else "(never started)"
