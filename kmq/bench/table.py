"""The report as text: the contenders' medians and the targets, as rich tables."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from kmq.bench.results import Row
from kmq.bench.runner import BenchReport
from kmq.bench.targets import MB, Target

_STATUS_STYLE = {"met": "green", "missed": "red", "not measured": "dim"}


def print_report(report: BenchReport, console: Console) -> None:
    options = report.options
    console.print(
        f"kmq bench on {options.broker}: {options.messages:,} messages of {options.size} B, "
        f"{options.partitions} partitions, batches of {options.batch}, medians of {options.repeat} alternating runs"
        + (" after one warm-up round (not counted)" if options.warm_up else ""),
        highlight=False,
    )
    console.print(contenders_table(report.rows))
    console.print(targets_table(report.targets))


def contenders_table(rows: list[Row]) -> Table:
    table = Table(title="contenders", title_justify="left")
    headers = (
        "contender",
        "throughput",
        "÷ plain",
        "CPU µs/msg",
        "tracker CPU µs/msg",
        "latency",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "RSS MB",
    )
    for header in (*headers, "note"):
        table.add_column(header, justify="left" if header in ("contender", "latency", "note") else "right")
    for row in rows:
        table.add_row(
            row.contender,
            "" if math.isnan(row.rate) else f"{row.rate:,.0f} {row.rate_unit}",
            _number(row.ratio_to_plain, "{:.2f}"),
            _number(row.cpu_us_per_msg, "{:.1f}"),
            _number(row.tracker_cpu_us_per_msg, "{:.1f}"),
            row.latency,
            _number(row.p50_ms, "{:.2f}"),
            _number(row.p95_ms, "{:.2f}"),
            _number(row.p99_ms, "{:.2f}"),
            _number(row.rss_bytes / MB, "{:.0f}"),
            row.note,
        )
    return table


def targets_table(targets: list[Target]) -> Table:
    table = Table(title="targets", title_justify="left")
    for header in ("target", "measured", "limit", "status"):
        table.add_column(header, justify="right" if header in ("measured", "limit") else "left")
    for target in targets:
        style = _STATUS_STYLE[target.status]
        table.add_row(
            target.name,
            _number(target.measured, "{:,.2f}"),
            f"{target.comparison} {target.limit:,g} {target.unit}",
            f"[{style}]{target.status}[/]",
        )
    return table


def _number(value: float, template: str) -> str:
    return "—" if math.isnan(value) else template.format(value)
