"""`--plot FILE.png`: throughput bars and latency bars (p50/p95/p99) per contender. Needs matplotlib
(`pip install 'kmq[bench]'`), imported only here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kmq.bench.results import Row
from kmq.bench.runner import BenchReport
from kmq.errors import BenchError

_PERCENTILES = (("p50", "p50_ms"), ("p95", "p95_ms"), ("p99", "p99_ms"))
_BAR_WIDTH = 0.27


def write_plot(report: BenchReport, path: Path) -> None:
    options = report.options
    draw(
        report.rows,
        title(options.broker, options.messages, options.size, options.partitions, options.batch, options.repeat),
        path,
    )


def title(broker: str, messages: int, size: int, partitions: int, batch: int, repeat: int) -> str:
    return (
        f"kmq bench on {broker}: {messages:,} messages of {size} B, "
        f"{partitions} partitions, batch {batch}, median of {repeat}"
    )


def draw(rows: Sequence[Row], suptitle: str, path: Path) -> None:
    """The two panels for `rows` (those without a rate left out), as a PNG (no timestamp in it: the same rows give
    the same file)."""
    plt = _pyplot()
    measured = [row for row in rows if not math.isnan(row.rate)]
    width = max(12.0, 0.75 * len(measured))  # room for every contender's label
    figure, (rates, latencies) = plt.subplots(1, 2, figsize=(width, 4.5), layout="constrained")
    _rate_bars(rates, measured)
    _latency_bars(latencies, measured)
    figure.suptitle(suptitle)
    figure.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(figure)


def _rate_bars(axes: Any, rows: Sequence[Row]) -> None:
    labels = [f"{row.contender}\n({row.rate_unit})" for row in rows]
    bars = axes.bar(labels, [row.rate for row in rows], color="tab:blue")
    axes.bar_label(bars, labels=[f"{row.rate:,.0f}" for row in rows], fontsize=7, rotation=90, padding=2)
    axes.tick_params(axis="x", labelsize=7, labelrotation=90)
    axes.set_yscale("log")  # the REST facade's thousands beside the plain consumer's hundreds of thousands
    axes.set_title("throughput (higher is better, log scale)")
    axes.set_ylabel("per second")


def _latency_bars(axes: Any, rows: Sequence[Row]) -> None:
    positions = range(len(rows))
    for shift, (label, attribute) in enumerate(_PERCENTILES):
        values = [0.0 if math.isnan(getattr(row, attribute)) else getattr(row, attribute) for row in rows]
        axes.bar([p + (shift - 1) * _BAR_WIDTH for p in positions], values, _BAR_WIDTH, label=label)
    axes.set_xticks(list(positions), [f"{row.contender}\n{row.latency}" for row in rows], fontsize=7, rotation=90)
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
