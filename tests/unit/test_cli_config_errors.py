"""Configuration errors of the commands: a bad or missing setting names its variable, a taken port its flag."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from kmq.cli._app import _register_all, app

runner = CliRunner()
COMMANDS = [
    ["consume", "-q", "jobs"],
    ["send", "-q", "jobs", "x"],
    ["topics", "check", "-q", "jobs"],
    ["dlq", "list", "-q", "jobs"],
    ["worker", "json:dumps", "-q", "jobs"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: "-".join(command[:2]))
def test_a_missing_bootstrap_setting_names_its_variable(command: list[str]) -> None:
    _register_all()
    result = runner.invoke(app, command, env={"KMQ_BOOTSTRAP_SERVERS": None, "KMQ_QUEUE_TOPIC": None})
    assert result.exit_code == 1
    assert "bootstrap_servers" in result.output and "set KMQ_BOOTSTRAP_SERVERS or its flag" in result.output


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: "-".join(command[:2]))
def test_an_invalid_value_names_its_variable(command: list[str]) -> None:
    _register_all()
    result = runner.invoke(app, command, env={"KMQ_BOOTSTRAP_SERVERS": "b:1", "KMQ_MSG_TIMEOUT_MS": "-5"})
    assert result.exit_code == 1
    assert "msg_timeout_ms" in result.output and "set KMQ_MSG_TIMEOUT_MS or its flag" in result.output


def test_a_taken_metrics_port_is_a_one_line_error() -> None:
    _register_all()
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(
            app, ["worker", "json:dumps", "-b", "localhost:1", "-q", "jobs", "--metrics-port", str(port)]
        )
    assert result.exit_code == 1, result.output
    assert f"--metrics-port {port}: Address already in use" in result.output
