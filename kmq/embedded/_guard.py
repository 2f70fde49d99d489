"""A child that dies with its parent: Linux's PR_SET_PDEATHSIG, set in the child itself before it execs the broker.

Run as a script (`python -I -S _guard.py <parent-pid> <program> [args...]`) it sets the signal and then execs
`program`, which keeps it (it survives execve) and keeps the pid. Doing this in a fresh interpreter, not in a
`preexec_fn`, keeps it clear of the locks other threads of the parent (librdkafka's) may hold at fork time.

The kernel sends the signal when the *thread* that forked the child exits, not only the process: `_spawn` therefore
forks every broker from one long-lived thread. The script imports nothing from kmq so it starts in ~10 ms.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
ORPHANED_EXIT_CODE = 70


def die_with_parent(parent_pid: int) -> None:
    """Ask for SIGKILL when the parent dies; exit at once if it already has (nobody would signal us then)."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG): {os.strerror(errno)}")
    if os.getppid() != parent_pid:
        os._exit(ORPHANED_EXIT_CODE)


def main(argv: list[str]) -> None:
    parent_pid, program = int(argv[1]), argv[2]
    die_with_parent(parent_pid)
    os.execv(program, argv[2:])


if __name__ == "__main__":
    main(sys.argv)
