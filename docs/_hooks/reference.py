"""mkdocs hook: the reference pages that are generated from the code at build time, never copied by hand.

- reference/cli.md from the `kmq` Typer app's Click command tree (built-in commands and those the tracker and the
  REST facade register through the `kmq.commands` entry points);
- reference/http.md from the REST facade's OpenAPI schema (the app is built, never started: no Kafka);
- reference/metrics.md from the components' metrics.py registries (tracker, REST facade, worker).

The rendering lives in docs/_hooks/render.py (importable alone, for a test); this module only adds the pages.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parents[1]
for _path in (_HERE, _ROOT, _ROOT / "tracker", _ROOT / "api"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import render  # noqa: E402  # after the path set-up above: mkdocs loads hooks by file, not as a package

_PAGES = {
    "reference/cli.md": render.cli_page,
    "reference/http.md": render.http_page,
    "reference/metrics.md": render.metrics_page,
}


def on_files(files: Any, config: Any) -> Any:
    """Adds the generated pages to the site's files (the nav names them)."""
    from mkdocs.structure.files import File

    for uri, page in _PAGES.items():
        files.append(File.generated(config, uri, content=page()))
    return files
