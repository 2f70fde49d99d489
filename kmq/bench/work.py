"""`burn(us)`: the CPU a real handler spends on a message (`kmq bench --work-us`), as a busy loop on the clock."""

from __future__ import annotations

import time


def burn(work_us: int) -> None:
    """Spin for `work_us` µs of wall time on this thread (holding the GIL, as Python code does)."""
    if work_us <= 0:
        return
    clock = time.perf_counter_ns
    until = clock() + work_us * 1000
    while clock() < until:
        pass


def burn_each(work_us: int, messages: int) -> None:
    """`burn(work_us)` once per message (nothing when there is no work: the no-op handler costs nothing more)."""
    if work_us > 0:
        for _ in range(messages):
            burn(work_us)
