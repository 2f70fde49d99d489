"""The bench's CPU split by thread: a busy thread shows up under its own name."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from kmq.bench.threads import thread_cpu_ns, us_per_message

pytestmark = pytest.mark.needs(sys.platform.startswith("linux"), "reads /proc/self/task")


def _spin_then_wait(seconds: float, spun: threading.Event, release: threading.Event) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass
    spun.set()
    release.wait()  # alive until read: a thread that ended is gone from /proc


def test_a_busy_thread_is_counted_under_its_name_and_an_idle_one_not_at_all() -> None:
    spun, release = threading.Event(), threading.Event()
    before = thread_cpu_ns()
    busy = threading.Thread(target=_spin_then_wait, args=(0.05, spun, release), name="bench-busy")
    idle = threading.Thread(target=release.wait, name="bench-idle")
    busy.start()
    idle.start()
    assert spun.wait(30)
    after = thread_cpu_ns()
    release.set()
    busy.join()
    idle.join()

    per_message = us_per_message(before, after, messages=1000)

    assert "MainThread" in after
    assert per_message["bench-busy"] >= 45  # 50 ms of CPU over 1000 messages
    assert per_message.get("bench-idle", 0) < 5


def test_roles_that_did_nothing_are_left_out_and_new_threads_count_from_zero() -> None:
    per_message = us_per_message({"a": 1_000, "b": 5_000}, {"a": 1_000, "b": 7_000, "c": 3_000}, messages=2)

    assert per_message == {"b": 1.0, "c": 1.5}


def test_another_process_is_split_into_its_main_thread_and_the_rest() -> None:
    busy_then_wait = "import sys, time; sum(range(3_000_000)); print('spun', flush=True); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", busy_then_wait], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"spun\n"
        spent = thread_cpu_ns(child.pid)
    finally:
        child.communicate(b"")
    assert spent["MainThread"] > 10_000_000  # summing three million ints: tens of ms
    assert thread_cpu_ns(child.pid) == {}  # gone
