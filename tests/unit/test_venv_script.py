"""scripts/_venv.sh, the install step of scripts/demo and scripts/test: one line of progress, pip's output only when
the install fails. A stand-in `python` in the virtualenv plays pip (prints build-backend noise, then succeeds or
fails), so the test needs no network."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOISE = "!! Please be careful with folders in your working directory"


def _source_venv_script(tmp_path: Path, pip_exit_code: int) -> subprocess.CompletedProcess[str]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    fake_python = venv / "bin" / "python"
    fake_python.write_text(f'#!/bin/sh\necho "{NOISE}"\necho "pip says: $*" >&2\nexit {pip_exit_code}\n')
    fake_python.chmod(fake_python.stat().st_mode | stat.S_IXUSR)
    pyproject = tmp_path / "pyproject.toml"
    if not pyproject.exists():  # a newer pyproject.toml than the install's stamp means "install again"
        pyproject.write_text("")
    script = f"set -euo pipefail; source {ROOT / 'scripts' / '_venv.sh'}; echo sourced"
    env = {"PATH": "/usr/bin:/bin", "KMQ_VENV": str(venv), "PYTHON": sys.executable}
    return subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


def test_a_successful_install_says_one_line_and_keeps_pips_output_in_a_log(tmp_path: Path) -> None:
    done = _source_venv_script(tmp_path, pip_exit_code=0)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "sourced\n"
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("Installing kmq")
    assert NOISE in (tmp_path / "venv" / "install.log").read_text()
    assert (tmp_path / "venv" / ".kmq-installed").exists()


def test_an_up_to_date_virtualenv_installs_nothing_and_says_nothing(tmp_path: Path) -> None:
    assert _source_venv_script(tmp_path, pip_exit_code=0).returncode == 0
    again = _source_venv_script(tmp_path, pip_exit_code=1)  # pip would fail: it is not called
    assert (again.returncode, again.stdout, again.stderr) == (0, "sourced\n", "")


def test_a_failed_install_prints_pips_output_and_stops_the_script(tmp_path: Path) -> None:
    done = _source_venv_script(tmp_path, pip_exit_code=1)
    assert done.returncode != 0
    assert "sourced" not in done.stdout
    assert NOISE in done.stderr
    assert "pip says: -m pip install --upgrade pip" in done.stderr
    assert "failed" in done.stderr.splitlines()[-1]
    assert not (tmp_path / "venv" / ".kmq-installed").exists()
