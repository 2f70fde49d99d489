"""`kmq bench --work-us`: a handler's work is CPU spent, not wall time passed."""

from __future__ import annotations

import threading
import time

from kmq.bench.work import burn

WORK_US = 20_000


def test_each_handler_gets_its_cpu_even_when_another_thread_holds_the_gil_meanwhile() -> None:
    """Two handlers burning at once share the GIL: with a wall-clock loop each got about half the CPU it asked for."""
    spent: list[int] = []
    lock = threading.Lock()

    def handler() -> None:
        before = time.thread_time_ns()
        burn(WORK_US)
        with lock:
            spent.append(time.thread_time_ns() - before)

    threads = [threading.Thread(target=handler) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(spent) == 2
    assert all(cpu_ns >= WORK_US * 1000 for cpu_ns in spent), spent


def test_no_work_returns_at_once() -> None:
    before = time.thread_time_ns()
    burn(0)
    assert time.thread_time_ns() - before < WORK_US * 1000
