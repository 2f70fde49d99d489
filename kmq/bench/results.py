"""What the runs measured, and one table row per contender: medians over its runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kmq.bench.options import (
    HTTP,
    JVM_KMQ,
    KMQ,
    KMQ_BATCH,
    PLAIN,
    PLAIN_ASYNC,
    SHARE,
    TRACKER,
    WORKER,
    WORKER_KEY,
    split_variant,
    variant,
)
from kmq.bench.stats import median


@dataclass(frozen=True, slots=True)
class Run:
    """One run of one contender: its figures (as its process reported them), or why it was skipped."""

    contender: str
    round: int
    figures: dict[str, Any]
    skipped: str = ""


@dataclass(frozen=True, slots=True)
class Shape:
    """Where a contender's figures are: its rate, its latency percentiles, its memory."""

    rate: str
    rate_unit: str
    latency: str
    latency_keys: tuple[str, str, str]
    rss: str


_CONSUMER = Shape(
    "msgs_per_s", "msgs/s", "batch overhead", ("overhead_ms_p50", "overhead_ms_p95", "overhead_ms_p99"), "rss_bytes"
)
SHAPES = {
    PLAIN: _CONSUMER,
    PLAIN_ASYNC: _CONSUMER,
    KMQ: _CONSUMER,
    KMQ_BATCH: _CONSUMER,
    SHARE: _CONSUMER,
    WORKER: _CONSUMER,
    WORKER_KEY: _CONSUMER,
    JVM_KMQ: _CONSUMER,
    TRACKER: Shape(
        "offsets_per_s",
        "offsets/s",
        "redelivery lateness",
        ("lateness_ms_p50", "lateness_ms_p95", "lateness_ms_p99"),
        "rss_bytes",
    ),
    HTTP: Shape("receive_ack_msgs_per_s", "msgs/s", "ack latency", ("ack_ms_p50", "ack_ms_p95", "ack_ms_p99"), ""),
}


@dataclass(frozen=True, slots=True)
class Row:
    """A contender's medians over its runs (NaN where it has no such figure)."""

    contender: str
    runs: int
    rate: float
    rate_unit: str
    ratio_to_plain: float
    latency: str
    p50_ms: float
    p95_ms: float
    p99_ms: float
    rss_bytes: float
    cpu_us_per_msg: float  # CPU of the consumer's process (all threads) per message: the client's own cost
    note: str
    tracker_cpu_us_per_msg: float = math.nan  # CPU of the tracker running beside a kmq contender, per message


def figure(runs: Sequence[Run], key: str) -> float:
    """The median of `key` over the runs that have it."""
    return median([float(r.figures[key]) for r in runs if isinstance(r.figures.get(key), int | float)])


def ratio(runs: Sequence[Run], numerator: str, denominator: str) -> float:
    """The median over rounds of numerator's rate ÷ denominator's rate in the same round (drift cancels out)."""
    rates = {(r.contender, r.round): _rate(r) for r in runs if not r.skipped}
    rounds = sorted({round_ for _, round_ in rates})
    pairs = [(rates.get((numerator, n)), rates.get((denominator, n))) for n in rounds]
    return median([a / b for a, b in pairs if a is not None and b is not None and b > 0])


def rows(runs: Sequence[Run], contenders: Sequence[str], notes: dict[str, str]) -> list[Row]:
    return [_row(name, [r for r in runs if r.contender == name], runs, notes.get(name, "")) for name in contenders]


def shape(name: str) -> Shape:
    """Where the figures of a run named `name` (a contender, or its variant `plain@20us`) are."""
    return SHAPES[split_variant(name)[0]]


def headline(run: Run) -> str:
    """One line about one run, for the progress display."""
    if run.skipped:
        return f"{run.contender} #{run.round + 1}: {run.skipped}"
    where, figures = shape(run.contender), run.figures
    parts = [f"{figures[where.rate]:,.0f} {where.rate_unit}"] if _number(figures.get(where.rate)) else []
    for label, key in (("p95", where.latency_keys[1]), ("p99", where.latency_keys[2])):
        if _number(figures.get(key)):
            parts.append(f"{where.latency} {label} {figures[key]:.2f} ms")
            break
    if _number(figures.get("cpu_us_per_msg")):
        parts.append(f"{figures['cpu_us_per_msg']:.1f} µs CPU/msg")
    if _number(figures.get("tracker_cpu_us_per_msg")):
        parts.append(f"tracker {figures['tracker_cpu_us_per_msg']:.1f} µs CPU/msg")
    return f"{run.contender} #{run.round + 1}: " + ", ".join(parts)


def _number(value: object) -> bool:
    """A figure to print: a number, and not NaN (the worker contender has no batch overhead)."""
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def _row(name: str, mine: list[Run], everything: Sequence[Run], note: str) -> Row:
    where = shape(name)
    measured = [r for r in mine if not r.skipped]
    note = note or next((r.skipped for r in mine if r.skipped), "")
    p50, p95, p99 = (figure(measured, key) for key in where.latency_keys)
    plain = variant(PLAIN, split_variant(name)[1])  # ÷ the plain consumer with the same work per message
    return Row(
        contender=name,
        runs=len(measured),
        rate=figure(measured, where.rate),
        rate_unit=where.rate_unit,
        ratio_to_plain=ratio(everything, name, plain) if where.rate_unit == "msgs/s" else math.nan,
        latency=where.latency,
        p50_ms=p50,
        p95_ms=p95,
        p99_ms=p99,
        rss_bytes=figure(measured, where.rss),
        cpu_us_per_msg=figure(measured, "cpu_us_per_msg"),
        note=note,
        tracker_cpu_us_per_msg=figure(measured, "tracker_cpu_us_per_msg"),
    )


def _rate(run: Run) -> float | None:
    value = run.figures.get(shape(run.contender).rate)
    return float(value) if isinstance(value, int | float) else None
