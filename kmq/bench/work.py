"""`burn(us)`: the CPU a real handler spends on a message (`kmq bench --work-us`), as a busy loop on the thread's CPU
clock."""

from __future__ import annotations

import time


def burn(work_us: int) -> None:
    """Spin until this thread has spent `work_us` µs of CPU (holding the GIL, as Python code does).

    CPU time, not wall time: on a machine shared with other work a wall-clock loop is preempted and its handler gets
    less CPU than asked, which made the contenders' "20 µs handlers" cheaper the busier the machine."""
    if work_us <= 0:
        return
    clock = time.thread_time_ns
    until = clock() + work_us * 1000
    while clock() < until:
        pass


def burn_each(work_us: int, messages: int) -> None:
    """`burn(work_us)` once per message (nothing when there is no work: the no-op handler costs nothing more)."""
    if work_us > 0:
        for _ in range(messages):
            burn(work_us)
