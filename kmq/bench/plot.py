"""`--plot FILE.png`: throughput bars and latency bars (p50/p95/p99) per contender. Needs matplotlib
(`pip install 'kmq[bench]'`), imported only here."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from kmq.bench.results import Row
from kmq.bench.runner import BenchReport
from kmq.errors import BenchError

_PERCENTILES = (("p50", "p50_ms"), ("p95", "p95_ms"), ("p99", "p99_ms"))
_BAR_WIDTH = 0.27


def write_plot(report: BenchReport, path: Path) -> None:
    plt = _pyplot()
    measured = [row for row in report.rows if not math.isnan(row.rate)]
    figure, (rates, latencies) = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    _rate_bars(rates, measured)
    _latency_bars(latencies, measured)
    options = report.options
    figure.suptitle(
        f"kmq bench on {options.broker}: {options.messages:,} messages of {options.size} B, "
        f"{options.partitions} partitions, batch {options.batch}, median of {options.repeat}"
    )
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _rate_bars(axes: Any, rows: list[Row]) -> None:
    labels = [f"{row.contender}\n({row.rate_unit})" for row in rows]
    bars = axes.bar(labels, [row.rate for row in rows], color="tab:blue")
    axes.bar_label(bars, labels=[f"{row.rate:,.0f}" for row in rows], fontsize=8)
    axes.set_yscale("log")  # the REST facade's thousands beside the plain consumer's hundreds of thousands
    axes.set_title("throughput (higher is better, log scale)")
    axes.set_ylabel("per second")


def _latency_bars(axes: Any, rows: list[Row]) -> None:
    positions = range(len(rows))
    for shift, (label, attribute) in enumerate(_PERCENTILES):
        values = [0.0 if math.isnan(getattr(row, attribute)) else getattr(row, attribute) for row in rows]
        axes.bar([p + (shift - 1) * _BAR_WIDTH for p in positions], values, _BAR_WIDTH, label=label)
    axes.set_xticks(list(positions), [f"{row.contender}\n{row.latency}" for row in rows], fontsize=8)
    axes.set_title("latency (lower is better)")
    axes.set_ylabel("ms")
    axes.legend()


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise BenchError("--plot needs matplotlib: pip install 'kmq[bench]'") from e
    return plt
