"""The benchmark page shows the stored run: its generated part is what `python -m kmq.bench.page` makes of
docs/benchmarks/latest.json, and that run holds what a reader needs to trust it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kmq.bench.page import COMMAND, END, START, main, render, replace_section, section_of
from kmq.bench.page_data import load
from kmq.errors import BenchError

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"
LATEST = ROOT / "docs" / "benchmarks" / "latest.json"
PLOT = ROOT / "docs" / "images" / "benchmarks.png"
EVERY_CONTENDER = ("plain", "plain-async", "kmq", "kmq-batch", "share", "worker", "worker-key", "tracker", "http")


def stored() -> dict[str, Any]:
    return load(LATEST)


def test_the_page_shows_the_stored_run() -> None:
    assert section_of(PAGE.read_text(encoding="utf-8")) == render(stored()), f"run: {COMMAND}"


def test_the_stored_run_says_how_where_and_on_what_code_it_was_measured() -> None:
    data = stored()
    machine = data["machine"]
    for key in ("cpu", "cores", "memory_gb", "python", "confluent_kafka", "librdkafka", "broker_version"):
        assert machine[key], key
    assert len(machine["git_commit"]) == 40 and machine["git_dirty"] is False
    assert len(machine["load_average_start"]) == len(machine["load_average_end"]) == 3
    assert data["command"].startswith("kmq bench ") and "--repeat 5" in data["command"]
    assert data["options"]["repeat"] == 5 and data["options"]["work_us"] == [0, 20]
    measured = {row["contender"] for row in data["contenders"] if row["runs"] == 5}
    assert {*EVERY_CONTENDER, "plain@20us", "kmq-batch@20us"} <= measured


def test_every_goal_of_the_stored_run_was_measured() -> None:
    assert [t["name"] for t in stored()["targets"] if t["status"] == "not measured"] == []


def test_the_plot_is_in_the_repository_beside_the_page() -> None:
    assert PLOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](images/benchmarks.png)" in PAGE.read_text(encoding="utf-8")


def test_the_tracker_cpu_column_appears_when_the_run_measured_it() -> None:
    data = copy.deepcopy(stored())
    assert "tracker CPU µs/msg" not in render(_without_tracker_cpu(data))
    data["contenders"][0]["tracker_cpu_us_per_msg"] = 1.5
    assert "tracker CPU µs/msg" in render(data) and "| 1.5 |" in render(data)


def test_a_goal_not_measured_and_a_missed_one_say_so() -> None:
    data = copy.deepcopy(stored())
    data["targets"] = [
        {"name": "g1", "measured": None, "comparison": ">=", "limit": 0.9, "unit": "x", "status": "not measured"},
        {"name": "g2", "measured": 12.5, "comparison": "<=", "limit": 10.0, "unit": "ms", "status": "missed"},
    ]
    text = render(data)
    assert "| g1 ≥ 0.9 | — | not measured |" in text
    assert "| g2 ≤ 10 ms | 12.50 ms | **missed** |" in text


def test_the_generator_rewrites_only_between_the_markers_and_draws_the_plot(tmp_path: Path) -> None:
    run, page, plot = tmp_path / "run.json", tmp_path / "page.md", tmp_path / "plot.png"
    run.write_text(json.dumps(stored()), encoding="utf-8")
    page.write_text(f"# Before\n{START}\nold figures\n{END}\n## After\n", encoding="utf-8")

    assert main([str(run), "--page", str(page), "--plot", str(plot)]) == 0

    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# Before\n{START}\n") and text.endswith(f"{END}\n## After\n")
    assert "old figures" not in text and section_of(text) == render(stored())
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_page_without_markers_or_a_file_that_is_no_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="no generated section"):
        replace_section("# A page\n", "figures")
    (tmp_path / "other.json").write_text('{"runs": []}', encoding="utf-8")
    with pytest.raises(BenchError, match="not a run"):
        load(tmp_path / "other.json")


def _without_tracker_cpu(data: dict[str, Any]) -> dict[str, Any]:
    for row in data["contenders"]:
        row.pop("tracker_cpu_us_per_msg", None)
    return data
