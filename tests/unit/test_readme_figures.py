"""Every performance figure the README and the home page state comes from the stored benchmark run.

A figure is written with a comment naming its field right after it (`0.57` and a times sign, then
`<!-- bench: contenders.kmq-batch.ratio_to_plain -->`; the comment renders as nothing). The test reads the field from
docs/benchmarks/latest.json, rounds it as the figure is printed and compares; and it fails on a figure with a unit of
speed (times, msgs/s, ms, µs) that names no field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kmq.bench.page_data import load

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "index.md"]
LATEST = ROOT / "docs" / "benchmarks" / "latest.json"
TIMES = "\N{MULTIPLICATION SIGN}"
MARKER = "<!-- bench: "
MARKED = re.compile(rf"(\d[\d ,]*(?:\.\d+)?)(?:\s?(?:{TIMES}|msgs/s|ms|µs))?\**<!-- bench: ([^ ]+) -->")
SPEED = re.compile(rf"\d(?:[\d ,]*\d)?(?:\.\d+)?\s?(?:{TIMES}|msgs/s|ms\b|µs)\**")


def field(data: dict[str, Any], path: str) -> float:
    """`contenders.<contender>.<column>`: a column of the stored run's table."""
    table, contender, column = path.split(".")
    assert table == "contenders", f"{path}: only the table's columns are figures to quote"
    rows = [row for row in data["contenders"] if row["contender"] == contender]
    assert rows, f"{path}: the stored run has no contender {contender!r}"
    value = rows[0][column]
    assert isinstance(value, int | float), f"{path}: not measured in the stored run"
    return float(value)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_each_figure_is_the_stored_runs_rounded_as_printed(page: Path) -> None:
    data, text = load(LATEST), page.read_text(encoding="utf-8")
    found = MARKED.findall(text)
    assert found, f"{page.name} quotes no figure of the stored run"
    assert len(found) == text.count(MARKER), f"{page.name}: a bench comment follows no figure"
    for printed, path in found:
        number = printed.replace(" ", "").replace(",", "")
        decimals = len(number.partition(".")[2])
        expected = round(field(data, path), decimals)
        assert float(number) == expected, f"{page.name}: {printed} for {path}, the stored run gives {expected}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_figure_of_speed_is_stated_without_its_source(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    unsourced = [m.group() for m in SPEED.finditer(text) if not text.startswith(MARKER, m.end())]
    assert unsourced == [], f"{page.name}: name the field of docs/benchmarks/latest.json after each figure"


def test_a_figure_that_differs_from_the_stored_run_is_caught() -> None:
    data = load(LATEST)
    ratio = field(data, "contenders.kmq-batch.ratio_to_plain")
    wrong = f"{ratio + 0.1:.2f}{TIMES}<!-- bench: contenders.kmq-batch.ratio_to_plain -->"
    ((printed, path),) = MARKED.findall(wrong)
    assert float(printed) != round(field(data, path), 2)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_share_groups_are_faster_where_the_page_says_so(page: Path) -> None:
    data = load(LATEST)
    if "they are also faster" in page.read_text(encoding="utf-8"):
        share, batch = (field(data, f"contenders.{name}.rate") for name in ("share", "kmq-batch"))
        assert share > batch, f"{page.name}: the stored run has kmq-batch as fast as share groups: reword the claim"
