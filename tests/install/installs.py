"""The install tier's tools: kmq built as a release builds it (`python -m build`: the sdist, then the wheel from
the sdist) from the repository's files alone, and installed as users install it, into fresh virtualenvs with no
source tree on their path."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PIP_TIMEOUT_S = 300  # the wheelhouse from pip's cache (PyPI on a cold one), on a loaded machine
SERVICES = "tracker,api"  # the extras of the image: what `kmq tracker` and `kmq api` need


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path


@dataclass(frozen=True)
class Venv:
    root: Path
    cwd: Path  # outside the repository: nothing of the source tree is importable from here

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)

    def run(self, *argv: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        """`argv` (its first word from the venv's bin/) in `cwd`, with no PYTHONPATH or KMQ_* of the test run."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KMQ_") and k != "PYTHONPATH"}
        command = [self.bin(argv[0]), *argv[1:]]
        return subprocess.run(
            command, cwd=self.cwd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
        )


def checked(command: list[str], timeout_s: float = PIP_TIMEOUT_S, cwd: Path | None = None) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=cwd)
    assert done.returncode == 0, f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def make_venv(house: Path, root: Path, requirement: str) -> Venv:
    checked([sys.executable, "-m", "venv", "--without-pip", str(root)], timeout_s=120)
    install = [sys.executable, "-m", "pip", "--python", str(root / "bin" / "python"), "install", "-q", "--no-index"]
    checked([*install, "--find-links", str(house), requirement])
    cwd = root / "work"
    cwd.mkdir()
    return Venv(root, cwd)
