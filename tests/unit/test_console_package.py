"""The console's templates and static files ship in the wheel: pyproject's package-data names every one of them."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "api" / "kmq_api" / "console"


def test_every_template_and_static_file_is_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["kmq_api"]
    assets = [path for folder in ("templates", "static") for path in (CONSOLE / folder).iterdir() if path.is_file()]
    assert len(assets) >= 10
    relative = [str(path.relative_to(CONSOLE.parent)) for path in assets]
    assert [name for name in relative if not any(fnmatch.fnmatch(name, p) for p in patterns)] == []


def test_the_templates_load_nothing_from_elsewhere_and_hold_nothing_the_csp_would_block() -> None:
    for path in (CONSOLE / "templates").iterdir():
        text = path.read_text()
        assert not re.search(r"https?://", text), f"{path.name}: an asset from another origin"
        assert not re.search(r"<script(?![^>]*\bsrc=)", text), f"{path.name}: an inline script"
        assert not re.search(r"\son[a-z]+\s*=|\sstyle\s*=|<style", text), f"{path.name}: an inline handler or style"
