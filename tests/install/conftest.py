"""Fixtures of the install tier (tests/install/installs.py): the sdist and the wheel, the wheelhouse of their
dependencies, and two fresh virtualenvs: the core alone (`pip install kmq`), and the services' extras."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from installs import REPO, SERVICES, Dist, Venv, checked, make_venv


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """The sdist and the wheel of the repository's files (tracked, or new and not ignored), built offline."""
    source = tmp_path_factory.mktemp("source")
    listed = checked(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO)
    for relative in filter(None, listed.split("\0")):
        if (REPO / relative).is_file():  # a file deleted in the work tree is still listed
            (source / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / relative, source / relative)
    out = tmp_path_factory.mktemp("dist")
    checked([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)])
    (sdist,) = out.glob("kmq-*.tar.gz")
    (wheel,) = out.glob("kmq-*.whl")
    return Dist(sdist, wheel)


@pytest.fixture(scope="session")
def wheelhouse(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheels of kmq's dependencies and the services' (pip's cache serves them): every install below is then
    `--no-index`."""
    house = tmp_path_factory.mktemp("wheelhouse")
    checked([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(house), f"{dist.wheel}[{SERVICES}]"])
    return house


@pytest.fixture(scope="session")
def core_venv(dist: Dist, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """`pip install kmq`: no extra."""
    return make_venv(wheelhouse, tmp_path_factory.mktemp("core") / "venv", str(dist.wheel))


@pytest.fixture(scope="session")
def services_venv(dist: Dist, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """`pip install 'kmq[tracker,api]'`, as the image installs it."""
    return make_venv(wheelhouse, tmp_path_factory.mktemp("services") / "venv", f"{dist.wheel}[{SERVICES}]")
