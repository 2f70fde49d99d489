"""`kmq demo` keeps the children's log directory only when a child wrote to it, and says where it is."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from kmq.demo import run as demo_run
from kmq.demo.options import DemoOptions
from kmq.demo.processes import Children
from kmq.errors import BrokerUnavailableError


def fail_run(spawned: bool) -> Any:
    def _run(options: DemoOptions, console: Console, cluster: Any, children: Children, started: float) -> Any:
        if spawned:
            (children.log_dir / "tracker-0.log").write_text("started\n")
        raise BrokerUnavailableError("localhost:1", "Failed to get metadata")

    return _run


@pytest.mark.parametrize("spawned", [False, True], ids=["unreachable-before-any-child", "after-a-child"])
def test_the_log_directory_is_kept_only_with_logs_in_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spawned: bool
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(demo_run, "_run", fail_run(spawned))
    out = io.StringIO()
    with pytest.raises(BrokerUnavailableError):
        demo_run.run_demo(DemoOptions(bootstrap_servers="localhost:1"), Console(file=out, width=400))
    left = list(tmp_path.iterdir())
    if spawned:
        assert len(left) == 1 and (left[0] / "tracker-0.log").exists()
        assert f"logs of the child processes: {left[0]}" in out.getvalue()
    else:
        assert left == []
        assert "logs of the child processes" not in out.getvalue()
