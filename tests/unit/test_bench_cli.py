"""`kmq bench` refuses options that cannot work before it starts anything: one line, exit code 1."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

KMQ_CLI = "import sys; from kmq.cli import main; sys.argv[0] = 'kmq'; main()"


def kmq(*args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}
    return subprocess.run(
        [sys.executable, "-c", KMQ_CLI, *args], env=clean, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--backend", "mock", "--messages", "500000"], "too much for the mock broker"),
        (["--contenders", "plain,rabbitmq"], "contenders"),
        (["--contenders", ","], "--contenders"),
        (["--backend", "kraft"], "backend"),
    ],
)
def test_options_that_cannot_work_are_a_one_line_error(args: list[str], named: str) -> None:
    result = kmq("bench", *args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert named in result.stderr
    assert "Traceback" not in result.stderr


def test_help_lists_the_knobs() -> None:
    result = kmq("bench", "--help")
    assert result.returncode == 0, result.stderr
    for option in ("--backend", "--bootstrap-servers", "--messages", "--partitions", "--size", "--batch", "--repeat"):
        assert option in result.stdout
    assert "--json" in result.stdout and "--plot" in result.stdout


def test_help_names_every_contender() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}
    result = subprocess.run(
        [sys.executable, "-c", KMQ_CLI, "bench", "--help"],
        env={**clean, "COLUMNS": "400", "TERMINAL_WIDTH": "400"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "plain,kmq" in result.stdout
    for contender in ("jvm-kmq", "spark-kafka", "spark-kmq"):
        assert contender in result.stdout
