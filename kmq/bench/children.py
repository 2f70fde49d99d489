"""The bench's child processes: consumer workers, the tracker the kmq contender needs, and the tracker's and REST
facade's own benchmarks (run as `python -m ...`: `kmq` never imports `tracker` or `api`)."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kmq.bench import protocol
from kmq.bench.measure import rss_bytes
from kmq.bench.threads import thread_cpu_ns
from kmq.config import KmqConfig
from kmq.embedded._child import ChildProcess
from kmq.embedded._ports import HOST, free_port
from kmq.errors import BenchError

STOP_TIMEOUT_MS = 15_000
_PROBE_TIMEOUT_S = 1.0
_POLL_INTERVAL_S = 0.05


def child_env(extra: dict[str, str]) -> dict[str, str]:
    """Our environment without `KMQ_*` (a child gets exactly the settings given), plus `extra`."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}, **extra}


class Worker:
    """A `python -m kmq.bench.worker` child and its line protocol (`kmq.bench.protocol`)."""

    def __init__(
        self, contender: str, config: KmqConfig, args: Sequence[str], child: ChildProcess | None = None
    ) -> None:
        """`child`: a worker started otherwise that speaks the same protocol (the JVM one, `kmq.bench.jvm_kmq`)."""
        argv = [sys.executable, "-m", "kmq.bench.worker", contender, *args]
        self.name = f"{contender} worker"
        self._child = child or ChildProcess(self.name, argv, control=True, env=child_env(config.to_env()))

    def expect(self, word: str, timeout_ms: int) -> str:
        """The rest of the next protocol line, which must start with `word`."""
        line = self._child.receive(timeout_ms)
        if line is None:
            raise BenchError(f"{self.name} did not say {word} within {timeout_ms} ms{self._log()}")
        head, _, rest = line.partition(" ")
        if head != word:
            said = line if head == protocol.ERROR else f"unexpected {line!r}"
            raise BenchError(f"{self.name}: {said}{self._log()}")
        return rest

    def go(self) -> None:
        self._child.send(protocol.GO)

    def result(self, on_progress: Callable[[int], None], timeout_ms: int) -> dict[str, Any]:
        """Follow PROGRESS lines until RESULT (each line must come within `timeout_ms`)."""
        while True:
            line = self._next_line(timeout_ms)
            head, _, rest = line.partition(" ")
            if head == protocol.PROGRESS:
                on_progress(int(rest))
            elif head == protocol.RESULT:
                figures: dict[str, Any] = json.loads(rest)
                return figures
            else:
                raise BenchError(f"{self.name}: {line}{self._log()}")

    def _next_line(self, timeout_ms: int) -> str:
        line = self._child.receive(timeout_ms)
        if line is None:
            raise BenchError(f"{self.name} went silent for {timeout_ms} ms{self._log()}")
        return line

    def stop(self) -> None:
        self._child.stop(STOP_TIMEOUT_MS)

    def _log(self) -> str:
        return f"; its last output:\n{self._child.output_tail()}"


class TrackerChild:
    """`python -m kmq_tracker` for one queue, its probes on a free local port."""

    def __init__(self, config: KmqConfig) -> None:
        port = free_port()
        self.url = f"http://{HOST}:{port}"
        env = {**config.to_env(), "KMQ_TRACKER_HTTP_HOST": HOST, "KMQ_TRACKER_HTTP_PORT": str(port)}
        argv = [sys.executable, "-m", "kmq_tracker", "--log-level", "warning"]
        self._child = ChildProcess("tracker", argv, env=child_env(env))

    def wait_ready(self, timeout_ms: int) -> None:
        """Until /readyz answers 200 (joined, caught up); BenchError with its output if it exits or time runs out."""
        deadline = time.monotonic() + timeout_ms / 1000
        while _status(self.url + "/readyz") != 200:
            if not self._child.running() or time.monotonic() > deadline:
                state = f"exited with code {self._child.exit_code()}" if not self._child.running() else "not ready"
                raise BenchError(f"tracker {state} after {timeout_ms} ms; its output:\n{self._child.output_tail()}")
            time.sleep(_POLL_INTERVAL_S)  # poll interval of a condition checked against a deadline

    def figures(self) -> dict[str, Any]:
        """Its resident memory and the redeliveries it made (there should be none: every message is acknowledged)."""
        return {"tracker_rss_bytes": rss_bytes(self._child.pid), "redeliveries": _metric(self.url, "kmq_redeliveries")}

    def cpu_ns(self) -> int:
        """Nanoseconds on a CPU so far, all its threads (0 where /proc has no schedstat)."""
        return sum(thread_cpu_ns(self._child.pid).values())

    def stop(self, check: bool = True) -> None:
        """SIGTERM (SIGKILL at the deadline); with `check`, BenchError unless it exited cleanly."""
        code = self._child.stop(STOP_TIMEOUT_MS)
        if check and code != 0:
            raise BenchError(f"tracker exited with code {code}; its output:\n{self._child.output_tail()}")


def run_module(module: str, args: Sequence[str], env: dict[str, str], timeout_ms: int) -> dict[str, Any]:
    """`python -m module args`, whose stdout is one JSON object: that object."""
    deadline = time.monotonic() + timeout_ms / 1000
    child = ChildProcess(module, [sys.executable, "-m", module, *args], control=True, env=child_env(env))
    try:
        lines = _lines_until_eof(child, deadline)
        while child.running() and time.monotonic() < deadline:
            time.sleep(_POLL_INTERVAL_S)  # it closed stdout: wait (with the deadline) for it to exit
    finally:
        code = child.stop(STOP_TIMEOUT_MS)
    if code != 0:
        raise BenchError(f"python -m {module} exited with code {code}; its output:\n{child.output_tail()}")
    try:
        figures: dict[str, Any] = json.loads("\n".join(lines))
    except json.JSONDecodeError as e:
        raise BenchError(f"python -m {module} printed no JSON object ({e}); its output:\n{child.output_tail()}") from e
    return figures


def _lines_until_eof(child: ChildProcess, deadline: float) -> list[str]:
    lines: list[str] = []
    while (line := child.receive(max(0, int((deadline - time.monotonic()) * 1000)))) is not None:
        lines.append(line)
    if child.running() and time.monotonic() >= deadline:
        raise BenchError(f"python -m {child.name} did not finish in time; its output:\n{child.output_tail()}")
    return lines


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=_PROBE_TIMEOUT_S) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return None


def _metric(url: str, name: str) -> float | None:
    """The sum of a Prometheus counter's samples (`name_total`), None when the tracker does not answer."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=_PROBE_TIMEOUT_S) as response:
            text = response.read().decode()
    except OSError:
        return None
    families = [f for f in text_string_to_metric_families(text) if f.name == name]
    return sum(s.value for f in families for s in f.samples if s.name == f"{name}_total")
