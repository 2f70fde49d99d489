"""`kmq demo` end to end: it loses nothing, and a Ctrl-C at any point leaves no process running.

The Ctrl-C and kill tests let the demo start its own embedded broker (it must stop with the rest); the runs that
verify the tally use the session's broker (KMQ_BOOTSTRAP_SERVERS, as a user with a cluster would): a JVM start less
each.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from kmq.embedded import KafkaCluster
from tests.integration.console_browser import http_log_in

pytestmark = pytest.mark.integration
KMQ = str(Path(sys.executable).parent / "kmq")
SMALL = ["--messages", "300", "--poison-every", "50", "--msg-timeout-ms", "1000", "--timeout", "90"]


class Output:
    """The lines a child prints, collected by a thread so the test can wait for one without blocking."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._process = process
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def wait_for(self, pattern: str, timeout_s: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for line in self.lines:
                    if found := re.search(pattern, line):
                        return found
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"no line matching {pattern!r} within {timeout_s}s:\n{self.text}"
                self._changed.wait(remaining)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def close(self) -> None:
        """After the process ended: the last lines read, the pipe closed."""
        self.join(10)
        if self._process.stdout is not None:
            self._process.stdout.close()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()


@contextmanager
def demo(
    *args: str, log_dir: Path, cluster: KafkaCluster | None = None
) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    """`kmq demo ARGS` in the background (its child logs under `log_dir`) on `cluster`, else on a broker it starts;
    killed with everything it started if the test fails midway."""
    backend = os.environ.get("KMQ_TEST_BACKEND")
    on_cluster = {"KMQ_BOOTSTRAP_SERVERS": cluster.bootstrap_servers} if cluster is not None else {}
    process = subprocess.Popen(
        [KMQ, "demo", *args, *(["--backend", backend] if backend else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200", "TMPDIR": str(log_dir), **on_cluster},
    )
    output = Output(process)
    try:
        yield process, output
    finally:
        if process.poll() is None:
            leftovers = descendants(process.pid)
            process.kill()
            process.wait()
            for pid in leftovers:
                _kill(pid)
        output.close()


def unless_stand_in(kafka: KafkaCluster) -> KafkaCluster | None:
    """The session's cluster for a demo, unless it is a stand-in: its clients need the stand-in's own settings
    (short fetch waits), which the demo gives only the broker it starts."""
    return kafka if kafka.backend in ("kafka", "external") else None


def descendants(root: int) -> set[int]:
    """Every process below `root` (children, grandchildren, ...), from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        parents[int(stat.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    """Running (a zombie, waiting to be reaped, has stopped running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return


def wait_gone(pids: set[int], timeout_s: float) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while (running := {pid for pid in pids if alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return running


@pytest.mark.parametrize("marker_format", ["kmq", "batch"])
def test_demo_verifies_from_the_topics_that_nothing_was_lost(
    tmp_path: Path, marker_format: str, kafka: KafkaCluster
) -> None:
    args = (*SMALL, "--workers", "2", "--marker-format", marker_format)
    with demo(*args, log_dir=tmp_path, cluster=unless_stand_in(kafka)) as (process, output):
        code = process.wait(timeout=120)
        output.join(10)
    text = output.text
    assert code == 0, text
    assert re.search(r"^\s*lost\s+0\s*$", text, re.MULTILINE), text
    assert re.search(r"^\s*sent\s+300\s*$", text, re.MULTILINE), text
    # Numbers 50, 100, ..., 300 are poison: rejected by the workers straight to the dead-letter topic.
    assert re.search(r"dead-lettered\s+\d+ \(.*6 rejected: poison message", text), text
    redelivered = re.search(r"^\s*redelivered\s+([\d,]+)\s*$", text, re.MULTILINE)
    assert redelivered is not None
    assert int(redelivered[1].replace(",", "")) > 0, "10% are dropped: some must have been redelivered"
    assert "tracker-1: partitions" in text and "tracker-2: partitions" in text, text


# A long run: the messages keep coming back (half are dropped, and redelivered only after a minute).
LONG = ["--messages", "100000", "--drop-rate", "0.5", "--msg-timeout-ms", "60000"]


def busy(process: subprocess.Popen[str], output: Output) -> set[int]:
    """Wait until the workers process messages; every process the demo started by then."""
    output.wait_for(r"sent [\d,]+ · processed [1-9]", timeout_s=90)
    started = descendants(process.pid)
    broker = 0 if os.environ.get("KMQ_BOOTSTRAP_SERVERS") else 1
    assert len(started) >= broker + 6, f"broker, 2 trackers, API and 3 workers expected, found {started}"
    return started


def test_ctrl_c_in_the_middle_stops_every_process_the_demo_started(tmp_path: Path) -> None:
    # Given a demo in the middle of a long run
    with demo(*LONG, log_dir=tmp_path) as (process, output):
        started = busy(process, output)
        # When Ctrl-C reaches it
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    # Then it exits as interrupted, and everything it started has stopped
    assert code == 130, output.text
    assert "interrupted" in output.text
    assert list(tmp_path.iterdir()) == [], "the logs of an interrupted run are not kept"
    assert wait_gone(started, timeout_s=10) == set(), output.text


@pytest.mark.needs(sys.platform == "linux", "parent-death signals are Linux's")
def test_even_a_killed_demo_leaves_nothing_running(tmp_path: Path) -> None:
    with demo(*LONG, log_dir=tmp_path) as (process, output):
        started = busy(process, output)
        process.kill()  # no chance to clean up: the kernel stops its children
        process.wait(timeout=10)
    assert wait_gone(started, timeout_s=10) == set(), output.text


def test_a_demo_kept_running_prints_the_consoles_address_and_a_key_that_logs_in(
    tmp_path: Path, kafka: KafkaCluster
) -> None:
    with demo(*SMALL, "--workers", "2", "--keep-running", log_dir=tmp_path, cluster=unless_stand_in(kafka)) as (
        process,
        output,
    ):
        found = output.wait_for(r"the console: (http://\S+/console) \(log in with the API key (\S+)\)", 150)
        base = found[1].removesuffix("/console")
        with httpx.Client(base_url=base, timeout=30) as http:
            assert http_log_in(http, found[2]).status_code == 303
            overview = http.get("/console")
            assert overview.status_code == 200 and "(admin)" in overview.text, overview.text
            assert overview.text.count('class="tracker"') == 2 and "unhealthy" not in overview.text, overview.text
        started = descendants(process.pid)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    assert wait_gone(started, timeout_s=10) == set(), output.text
