"""kmq bench's outputs from a made-up report: the table, the JSON file (every figure) and the plot."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from kmq.bench.jsonout import report_dict, write_json
from kmq.bench.options import HTTP, KMQ, PLAIN, SHARE, BenchOptions
from kmq.bench.plot import write_plot
from kmq.bench.results import Run, rows
from kmq.bench.runner import BenchReport
from kmq.bench.table import print_report
from kmq.bench.targets import targets

CONTENDERS = (PLAIN, KMQ, SHARE, HTTP)


def made_up_report() -> BenchReport:
    options = BenchOptions(contenders=CONTENDERS, repeat=1, messages=1000)
    consumer = {"overhead_ms_p50": 0.4, "overhead_ms_p95": 0.9, "overhead_ms_p99": 1.5, "rss_bytes": 48_000_000}
    runs = [
        Run(PLAIN, 0, {**consumer, "msgs_per_s": 800_000.0, "batches": 2}),
        Run(KMQ, 0, {**consumer, "msgs_per_s": 450_000.0, "redeliveries": 0.0, "tracker_cpu_us_per_msg": 2.25}),
        Run(SHARE, 0, {}, skipped="tansu has no share groups"),
        Run(HTTP, 0, {"receive_ack_msgs_per_s": 7000, "ack_ms_p50": 10.0, "ack_ms_p99": 30.0}),
    ]
    table = rows(runs, CONTENDERS, {SHARE: "tansu has no share groups"})
    return BenchReport(options, {"cpu": "test cpu", "cores": 2}, runs, table, targets(runs, table, 1000), {})


def test_the_table_shows_every_contender_ratio_and_target() -> None:
    console = Console(record=True, width=200, file=io.StringIO())
    print_report(made_up_report(), console)
    text = console.export_text()

    expected_figures = ("plain", "800,000 msgs/s", "0.56", "tansu has no share groups", "ack latency", "30.00", "2.2")
    for expected in (*expected_figures, "tracker CPU µs/msg"):
        assert expected in text
    assert "kmq ÷ plain throughput" in text and "missed" in text and "not measured" in text
    assert "after one warm-up round (not counted)" in text  # the reader learns the first round was discarded


def test_the_json_file_has_every_figure_and_null_for_what_was_not_measured(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    write_json(made_up_report(), path, "kmq bench --repeat 1")
    data = json.loads(path.read_text())

    assert data["command"] == "kmq bench --repeat 1"
    assert data["machine"]["cores"] == 2
    assert data["options"]["messages"] == 1000
    assert [run["contender"] for run in data["runs"]] == list(CONTENDERS)
    assert data["runs"][1]["figures"]["redeliveries"] == 0.0
    share = next(row for row in data["contenders"] if row["contender"] == SHARE)
    assert share["rate"] is None and share["note"] == "tansu has no share groups"
    http = next(row for row in data["contenders"] if row["contender"] == HTTP)
    assert (http["p95_ms"], http["p99_ms"]) == (None, 30.0)
    kmq = next(row for row in data["contenders"] if row["contender"] == KMQ)
    assert (kmq["tracker_cpu_us_per_msg"], http["tracker_cpu_us_per_msg"]) == (2.25, None)
    assert {t["status"] for t in data["targets"]} == {"met", "missed", "not measured"}
    # NaN is not JSON: nothing of it may remain anywhere.
    assert "NaN" not in path.read_text()
    by_name = {t["name"]: t for t in report_dict(made_up_report(), "x")["targets"]}
    assert by_name["kmq ÷ plain throughput"]["measured"] == 0.5625


def test_the_plot_is_a_png_with_both_panels(tmp_path: Path) -> None:
    path = tmp_path / "bench.png"
    write_plot(made_up_report(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000
