"""Benchmark of `PendingSet`: marker ingestion rate and resident memory per pending message.

    python -m kmq_tracker.bench_pending --count 1000000 [--json]

`run(count)` measures in a fresh interpreter, so the RSS growth is that of the pending set alone (VmRSS after building
`count` pending entries minus VmRSS before); `measure(count)` does the same work in the calling process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TypeVar

from kmq_tracker.pending import PendingSet

_BASE_DEADLINE_MS = 1_780_000_000_000
_TIMEOUT_MS = 30_000
_BATCH = 500  # messages per client batch: their STARTs share one timestamp, hence one deadline
_IN_FLIGHT = 1_000  # messages between a START and its END in the ingestion stream
_EXTEND_EVERY = 10  # every n-th message is extended once before its END

_T = TypeVar("_T")


def run(count: int) -> dict[str, float]:
    """Measure in a fresh interpreter and return the figures (see `measure`)."""
    command = [sys.executable, "-m", "kmq_tracker.bench_pending", "--count", str(count), "--in-process", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def measure(count: int) -> dict[str, float]:
    """Build `count` pending entries (memory, build rate, due scan, drain), then time a START/END stream."""
    baseline = rss_bytes()
    pending, build_s = _timed(lambda: _build(count))
    grown = rss_bytes()
    due_s = _timed(lambda: _scan_due(pending))[1]
    drain_s = _timed(lambda: _drain(pending, count))[1]
    markers, ingest_s = _timed(lambda: _ingest(count))
    return {
        "count": count,
        "rss_baseline_bytes": baseline,
        "rss_total_bytes": grown,
        "rss_growth_bytes": grown - baseline,
        "bytes_per_pending": (grown - baseline) / count,
        "build_starts_per_s": count / build_s,
        "due_1000_ms": due_s * 1000,
        "drain_ends_per_s": count / drain_s,
        "ingest_markers": markers,
        "ingest_markers_per_s": markers / ingest_s,
    }


def rss_bytes() -> int:
    """This process's resident set size, from /proc/self/status (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS line in /proc/self/status")


def _timed(function: Callable[[], _T]) -> tuple[_T, float]:
    began = time.perf_counter()
    result = function()
    return result, time.perf_counter() - began


def _deadline(i: int) -> int:
    return _BASE_DEADLINE_MS + i // _BATCH + _TIMEOUT_MS


def _build(count: int) -> PendingSet:
    pending = PendingSet()
    for i in range(count):
        pending.start(i, i, _deadline(i))
    return pending


def _scan_due(pending: PendingSet) -> list[int]:
    return pending.due(_BASE_DEADLINE_MS + 2 * _TIMEOUT_MS, 1000)


def _drain(pending: PendingSet, count: int) -> None:
    for i in range(count):
        pending.end(i)


def _ingest(count: int) -> int:
    """A marker stream as the tracker reads it: START per message, some extends, END `_IN_FLIGHT` messages later."""
    pending = PendingSet()
    marker = 0
    for i in range(count + _IN_FLIGHT):
        if i < count:
            pending.start(i, marker, _deadline(i))
            marker += 1
        done = i - _IN_FLIGHT
        if done >= 0:
            if done % _EXTEND_EVERY == 0:
                pending.start(done, marker, _deadline(i))
                marker += 1
            pending.end(done)
            marker += 1
    return marker


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1_000_000, help="pending entries to build (default 1000000)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--in-process", action="store_true", help="measure in this process, not a fresh one")
    args = parser.parse_args(argv)
    figures = measure(args.count) if args.in_process else run(args.count)
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
    else:
        sys.stdout.write("".join(f"{name:>22} {value:,.1f}\n" for name, value in figures.items()))


if __name__ == "__main__":
    main()
