"""Inside a worker process: the measured window, per-batch overhead samples, and the process's memory."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmq.bench.gcwatch import GcWatch
from kmq.bench.stats import percentiles
from kmq.bench.threads import ThreadCpu, thread_cpu_ns, us_per_message
from kmq.errors import BenchError

PROGRESS_INTERVAL_S = 0.25


@dataclass
class BatchClock:
    """Counts messages and batches, keeping each batch's overhead (ms).

    `start()` is GO (the queue is loaded); the measured window opens when the first records arrive, so that neither
    a group join nor librdkafka's wake-up after `resume()` (up to a second, measured) counts against a contender.
    """

    target: int
    started: float = 0.0
    cpu_started: float = 0.0
    opened: float = 0.0
    received: int = 0
    overhead_ms: list[float] = field(default_factory=list)
    threads_started: ThreadCpu = field(default_factory=dict)
    gc_watch: GcWatch = field(default_factory=GcWatch)
    _last_progress: float = 0.0
    _last_batch: float = 0.0

    def start(self) -> None:
        self.started = self._last_progress = self._last_batch = time.perf_counter()
        self.cpu_started = time.process_time()
        self.threads_started = thread_cpu_ns()
        self.gc_watch.start()

    def batch(self, size: int, overhead_s: float, arrived: float) -> bool:
        """Record one batch, whose records came out of the consumer at `arrived` (perf_counter); True when it is
        time to report progress."""
        self.opened = self.opened or arrived
        self.received += size
        self.overhead_ms.append(overhead_s * 1000)
        now = self._last_batch = time.perf_counter()
        if now - self._last_progress >= PROGRESS_INTERVAL_S:
            self._last_progress = now
            return True
        return False

    def check_stall(self, stall_s: float) -> None:
        """Raise when no batch came for `stall_s` (a contender that stopped receiving)."""
        if time.perf_counter() - self._last_batch > stall_s:
            raise BenchError(f"no message for {stall_s:.0f}s after {self.received} of {self.target}")

    @property
    def done(self) -> bool:
        return self.received >= self.target

    def figures(self, **extra: Any) -> dict[str, Any]:
        """Throughput over the window (first records to now), CPU the process used since GO (all its threads,
        librdkafka's included) and how it splits between threads, overhead percentiles, memory."""
        elapsed_s = time.perf_counter() - (self.opened or self.started)
        cpu_s = time.process_time() - self.cpu_started
        by_thread = us_per_message(self.threads_started, thread_cpu_ns(), self.received)
        self.gc_watch.stop()
        return {
            "messages": self.received,
            "elapsed_s": elapsed_s,
            "msgs_per_s": self.received / elapsed_s,
            "cpu_s": cpu_s,
            "cpu_us_per_msg": cpu_s / max(self.received, 1) * 1e6,
            "cpu_us_per_msg_by_thread": by_thread,
            "first_records_ms": (self.opened - self.started) * 1000 if self.opened else None,
            "batches": len(self.overhead_ms),
            **percentiles(self.overhead_ms, "overhead_ms"),
            "rss_bytes": rss_bytes(),
            **self.gc_watch.figures(self.received),
            **extra,
        }


def rss_bytes(pid: int | str = "self") -> int | None:
    """Resident set size of a process (Linux /proc; None elsewhere or when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None
