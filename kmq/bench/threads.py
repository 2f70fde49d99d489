"""CPU time of this process split by thread (Linux /proc): where a contender's CPU per message goes.

Each thread's time on a CPU comes from `/proc/self/task/<tid>/schedstat` (nanoseconds; `stat`'s clock ticks are 10 ms,
too coarse for a window of a second). Python threads are named by `threading`, librdkafka's by the kernel (`rdk:main`,
`rdk:broker1`, ...): threads of several clients with one name are added up, so a figure is per role, not per client.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

_TASKS = Path("/proc/self/task")
ThreadCpu = dict[str, int]  # thread role -> nanoseconds on a CPU


def thread_cpu_ns() -> ThreadCpu:
    """Nanoseconds on a CPU so far, per thread role (empty where /proc has no schedstat)."""
    python_names = {thread.native_id: thread.name for thread in threading.enumerate()}
    spent: ThreadCpu = {}
    try:
        tids = os.listdir(_TASKS)
    except OSError:
        return spent
    for tid in tids:
        try:
            ns = int((_TASKS / tid / "schedstat").read_text().split()[0])
            kernel_name = (_TASKS / tid / "comm").read_text().strip()
        except (OSError, ValueError, IndexError):  # the thread ended meanwhile
            continue
        role = _role(python_names.get(int(tid)), kernel_name)
        spent[role] = spent.get(role, 0) + ns
    return spent


def us_per_message(before: ThreadCpu, after: ThreadCpu, messages: int) -> dict[str, float]:
    """Each role's CPU between two snapshots, in µs per message (threads that started meanwhile count from 0)."""
    per_message = {role: (ns - before.get(role, 0)) / 1000 / max(messages, 1) for role, ns in after.items()}
    return {role: round(us, 3) for role, us in sorted(per_message.items()) if us > 0}


def _role(python_name: str | None, kernel_name: str) -> str:
    if python_name is not None:
        return python_name
    if kernel_name.startswith("rdk:broker"):
        return "rdk:broker*"  # one per broker connection and client: added up
    return kernel_name
