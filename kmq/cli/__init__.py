"""The `kmq` command line: built-in commands plus those other packages register (tracker, api)."""

from __future__ import annotations

from kmq.cli._app import app, main

__all__ = ["app", "main"]
