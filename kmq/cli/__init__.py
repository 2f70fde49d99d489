"""The `kmq` command line: built-in commands plus those other packages register (tracker, api)."""

from __future__ import annotations

from kmq.cli import _early_stop

_early_stop.install()  # before the imports below, which take a while

from kmq.cli._app import app, main  # noqa: E402  # after the early signal handling

__all__ = ["app", "main"]
