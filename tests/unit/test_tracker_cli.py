"""`kmq tracker` / `python -m kmq_tracker`: registration, help, and configuration errors that name the setting."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from kmq.cli._app import _register_all, app
from kmq_tracker.cli import tracker
from kmq_tracker.config import TrackerConfig

runner = CliRunner()


def standalone() -> typer.Typer:
    single = typer.Typer()
    single.command()(tracker)
    return single


def test_kmq_tracker_is_registered_through_the_entry_point() -> None:
    _register_all()
    result = runner.invoke(app, ["tracker", "--help"], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
    assert result.exit_code == 0
    assert "KMQ_TRACKER_HTTP_PORT" in result.output
    assert "--redelivery-rate" in result.output


@pytest.mark.parametrize(
    ("env", "args", "named"),
    [
        ({"KMQ_QUEUE_TOPIC": "q"}, [], "KMQ_BOOTSTRAP_SERVERS"),
        ({"KMQ_BOOTSTRAP_SERVERS": "b:1"}, [], "KMQ_QUEUE_TOPIC"),
        (
            {"KMQ_BOOTSTRAP_SERVERS": "b:1", "KMQ_QUEUE_TOPIC": "q", "KMQ_TRACKER_MAX_IN_FLIGHT": "x"},
            [],
            "KMQ_TRACKER_MAX_IN_FLIGHT",
        ),
        (
            {"KMQ_BOOTSTRAP_SERVERS": "b:1", "KMQ_QUEUE_TOPIC": "q"},
            ["--redelivery-rate", "0"],
            "KMQ_TRACKER_REDELIVERY_RATE_PER_S",
        ),
        (
            {"KMQ_BOOTSTRAP_SERVERS": "b:1", "KMQ_QUEUE_TOPIC": "q", "KMQ_MSG_TIMEOUT_MS": "-5"},
            [],
            "KMQ_MSG_TIMEOUT_MS",
        ),
    ],
)
def test_a_bad_or_missing_setting_is_named(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], args: list[str], named: str
) -> None:
    for name in ("KMQ_BOOTSTRAP_SERVERS", "KMQ_QUEUE_TOPIC"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(standalone(), args)
    assert result.exit_code == 1
    assert named in result.output
    assert "Traceback" not in result.output


def test_flags_name_the_setting_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KMQ_BOOTSTRAP_SERVERS", raising=False)
    result = runner.invoke(standalone(), ["--queue", "q", "--log-level", "loud"])
    assert result.exit_code == 1
    assert "--log-level" in result.output


def test_python_m_tracker_fails_cleanly_without_configuration() -> None:
    env = {"PATH": "/usr/bin:/bin"}  # no KMQ_* at all
    done = subprocess.run(
        [sys.executable, "-m", "kmq_tracker"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert "KMQ_BOOTSTRAP_SERVERS" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", [["-m", "kmq_tracker"], ["-c", "from kmq.cli import main; main()", "tracker"]])
def test_help_names_every_tracker_variable(command: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, *command, "--help"],
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "400", "TERMINAL_WIDTH": "400"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    names = TrackerConfig.env_names()
    assert len(names) > 6
    for name in names:
        assert name in result.stdout
