"""A feature without its extra fails in one line that names the install command (tests/install checks the real
thing, a virtualenv with the core alone); `kmq --version` prints the installed distribution's version."""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kmq.cli import _app
from kmq.errors import MissingExtraError
from kmq.extras import EXTRAS, missing_modules, require

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())


def test_the_message_names_the_extras_and_the_pip_install() -> None:
    one = MissingExtraError("kmq tracker", ("tracker",), ("sortedcontainers",))
    assert str(one) == "kmq tracker needs the tracker extra: pip install 'kmq[tracker]'"
    two = MissingExtraError("kmq demo", ("tracker", "api"), ("fastapi",))
    assert str(two) == "kmq demo needs the tracker and api extras: pip install 'kmq[tracker,api]'"
    assert isinstance(two, ImportError)


def test_every_extra_checked_is_an_extra_of_the_distribution() -> None:
    assert set(EXTRAS) <= set(PYPROJECT["project"]["optional-dependencies"])


def test_require_raises_only_for_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    require("kmq tracker", "tracker")  # the dev extra installs every extra
    monkeypatch.setitem(EXTRAS, "tracker", ("sortedcontainers", "kmq_no_such_module"))
    assert missing_modules("tracker") == ("kmq_no_such_module",)
    with pytest.raises(MissingExtraError, match=r"pip install 'kmq\[tracker\]'") as raised:
        require("kmq tracker", "tracker")
    assert raised.value.missing == ("kmq_no_such_module",)


def test_a_command_whose_extra_is_missing_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EXTRAS, "tracker", ("kmq_no_such_module",))
    app = _app.typer.Typer()
    app.callback()(lambda: None)
    monkeypatch.setattr(_app, "app", app)
    for name in [name for name in sys.modules if name.split(".")[0] == "kmq_tracker"]:
        monkeypatch.delitem(sys.modules, name)  # imported again, from its first line: the check of the extra
    _app._register_entry(EntryPoint("tracker", "kmq_tracker.cli:register", "kmq.commands"))
    for args in (["tracker"], ["tracker", "--help"], ["tracker", "--http-port", "1"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1, result.output
        lines = result.stderr.strip().splitlines()
        assert lines == ["error: kmq tracker needs the tracker extra: pip install 'kmq[tracker]'"]


def test_the_version_is_the_distributions() -> None:
    result = CliRunner().invoke(_app.app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"kmq {PYPROJECT['project']['version']}\n"
