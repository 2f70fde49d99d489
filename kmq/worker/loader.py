"""`load_handler("package.module:function")`: the handler `kmq worker` runs."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from kmq.errors import ConfigError
from kmq.worker.outcome import Handler


def load_handler(spec: str) -> Handler:
    """Import `module:attribute` (the current directory is importable, as with `python -m`)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigError("HANDLER", f"{spec!r} is not MODULE:FUNCTION (e.g. myapp.jobs:handle)")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError("HANDLER", f"cannot import module {module_name!r}: {e}") from e
    target: object = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ConfigError("HANDLER", f"module {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ConfigError("HANDLER", f"{spec} is not callable")
    return target
