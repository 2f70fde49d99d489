"""The toxiproxy server dies with the test session that started it, even when the session is killed mid-test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.faults.toxiproxy import build
from tests.helpers import wait_for

pytestmark = pytest.mark.faults

SESSION = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tests.faults.toxiproxy import Toxiproxy

    proxy = Toxiproxy(Path(sys.argv[1]), Path(sys.argv[2])).start()
    print(proxy._process.pid, flush=True)  # the server's pid (behind the guard's exec, the same process)
    time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def test_a_session_killed_without_its_teardown_leaves_no_toxiproxy(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    with subprocess.Popen(
        [sys.executable, "-c", SESSION, str(build()), str(tmp_path / "toxiproxy.log")],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        text=True,
    ) as session:
        assert session.stdout is not None
        server = int(session.stdout.readline())
        assert _alive(server)
        session.send_signal(signal.SIGKILL)  # Linux: the guard's PR_SET_PDEATHSIG then kills the server
        session.wait(10)
    wait_for(lambda: not _alive(server), 10, what="the toxiproxy server to die with its session")
