"""`python -m kmq_api` and `kmq api` without a broker: help, and a one-line error naming a missing setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kmq_api.config import ApiConfig


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}
    return subprocess.run(
        [sys.executable, *args], env={**clean, **(env or {})}, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("command", [["-m", "kmq_api"], ["-c", "from kmq.cli import main; main()", "api"]])
def test_help_names_the_settings(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.returncode == 0, result.stderr
    for name in ("KMQ_API_QUEUES", "KMQ_API_KEYS", "KMQ_API_RECEIPT_SECRET", "--port"):
        assert name in result.stdout
    wide = run(*command, "--help", env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    for name in ApiConfig.env_names():
        assert name in wide.stdout


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"KMQ_API_QUEUES": "orders", "KMQ_API_KEYS": "k"}, "KMQ_API_RECEIPT_SECRET"),
        ({"KMQ_API_QUEUES": "orders", "KMQ_API_RECEIPT_SECRET": "s" * 32}, "KMQ_API_KEYS"),
        ({"KMQ_API_KEYS": "k", "KMQ_API_RECEIPT_SECRET": "s" * 32}, "KMQ_API_QUEUES"),
        ({"KMQ_API_QUEUES": "orders", "KMQ_API_KEYS": "k", "KMQ_API_RECEIPT_SECRET": "short"}, "32 characters"),
    ],
)
def test_a_missing_or_bad_setting_is_a_one_line_error(env: dict[str, str], named: str) -> None:
    result = run("-m", "kmq_api", env={"KMQ_BOOTSTRAP_SERVERS": "localhost:9", **env})
    assert result.returncode == 1
    assert named in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unknown_log_level_is_a_one_line_error() -> None:
    settings = {"KMQ_API_QUEUES": "orders", "KMQ_API_KEYS": "k", "KMQ_API_RECEIPT_SECRET": "s" * 32}
    result = run("-m", "kmq_api", "--log-level", "verbose", env={"KMQ_BOOTSTRAP_SERVERS": "localhost:9", **settings})
    assert result.returncode == 1
    assert "--log-level" in result.stderr and "'verbose'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [["-m", "kmq_api"], ["-c", "from kmq.cli import main; main()", "api"]])
def test_an_unreachable_broker_given_by_flag_is_a_one_line_error(command: list[str]) -> None:
    settings = {"KMQ_API_QUEUES": "jobs", "KMQ_API_KEYS": "k", "KMQ_API_RECEIPT_SECRET": "s" * 32}
    result = run(*command, "-b", "localhost:1", env={"KMQ_METADATA_TIMEOUT_MS": "2000", **settings})
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "localhost:1" in lines[0]
