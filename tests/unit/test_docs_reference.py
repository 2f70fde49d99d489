"""The site's generated reference pages (docs/_hooks/render.py) hold every command, endpoint and metric: each page is
checked against a source of its own (the CLI's --help, the facade's routes, the metric families a registry collects)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from kmq.cli import _app
from kmq.worker.metrics import WorkerMetrics
from kmq_api.metrics import ApiMetrics
from kmq_tracker.metrics import TrackerMetrics

HOOKS = Path(__file__).resolve().parents[2] / "docs" / "_hooks"


@pytest.fixture(scope="module")
def render() -> ModuleType:
    sys.path.insert(0, str(HOOKS))
    try:
        import render as module
    finally:
        sys.path.remove(str(HOOKS))
    return module


def commands_in_help(*path: str) -> list[str]:
    """The sub-commands `kmq PATH --help` lists (its Commands panel)."""
    _app._register_all()
    result = CliRunner().invoke(_app.app, [*path, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    panel = result.output.split("Commands")[-1] if "Commands" in result.output else ""
    return re.findall(r"^\W+([a-z][a-z-]+)\s{2,}", panel, re.MULTILINE)


def test_the_cli_page_has_every_command_and_sub_command(render: ModuleType) -> None:
    page = render.cli_page()
    top = commands_in_help()
    assert {"tracker", "api", "topics", "dlq", "worker"} <= set(top)
    for name in top:
        assert f"## `kmq {name}`" in page, name
    for group in ("topics", "dlq"):
        subs = commands_in_help(group)
        assert subs, group
        for name in subs:
            assert f"## `kmq {group} {name}`" in page, f"{group} {name}"
    assert "| `--bootstrap-servers`, `-b` |" in page


def test_the_http_page_has_every_route_of_the_app(render: ModuleType) -> None:
    page = render.http_page()
    schema = render.openapi_schema()
    assert "/v1/queues/{queue}/receive" in schema["paths"]
    for path, methods in schema["paths"].items():
        for method in methods:
            assert f"### `{method.upper()} {path}`" in page


def test_the_metrics_page_has_every_family_the_registries_expose(render: ModuleType) -> None:
    page = render.metrics_page()
    worker = WorkerMetrics("q")
    for registry in (TrackerMetrics().registry, ApiMetrics().registry, worker.registry):
        families = list(registry.collect())
        assert families
        for family in families:
            name = family.name + ("_total" if family.type == "counter" else "")
            assert f"| `{name}` | {family.type} |" in page, name
