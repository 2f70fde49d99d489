"""CPU time of a process split by thread (Linux /proc): where a contender's CPU per message goes.

Each thread's time on a CPU comes from `/proc/<pid>/task/<tid>/schedstat` (nanoseconds; `stat`'s clock ticks are 10 ms,
too coarse for a window of a second). In this process Python threads are named by `threading`; in another one
(CPython 3.11 does not name its threads for the kernel) the main thread is `MainThread` and the other Python threads
are added up as `python threads`. librdkafka's are named by the kernel (`rdk:main`, `rdk:broker1`, ...): threads of
several clients with one name are added up, so a figure is per role, not per client.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

ThreadCpu = dict[str, int]  # thread role -> nanoseconds on a CPU


def thread_cpu_ns(pid: int | None = None) -> ThreadCpu:
    """Nanoseconds on a CPU so far, per thread role, of this process or of `pid` (empty where /proc has no
    schedstat, or the process is gone)."""
    if pid is None or pid == os.getpid():
        python_names = {thread.native_id: thread.name for thread in threading.enumerate()}
        tasks = Path("/proc/self/task")
    else:
        python_names = {pid: "MainThread"}
        tasks = Path(f"/proc/{pid}/task")
    spent: ThreadCpu = {}
    try:
        tids = os.listdir(tasks)
    except OSError:
        return spent
    for tid in tids:
        try:
            ns = int((tasks / tid / "schedstat").read_text().split()[0])
            kernel_name = (tasks / tid / "comm").read_text().strip()
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
    if kernel_name.startswith("python"):
        return "python threads"  # another process's (its interpreter's name): not told apart
    return kernel_name
