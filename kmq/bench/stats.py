"""Percentiles and medians of measured figures."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

PERCENTILES = (50, 95, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) by linear interpolation between the closest ranks; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def percentiles(values: Sequence[float], prefix: str) -> dict[str, float]:
    """`{prefix}_p50`, `_p95`, `_p99` of `values`."""
    return {f"{prefix}_p{q}": percentile(values, q) for q in PERCENTILES}


def median(values: Sequence[float]) -> float:
    """The median of the values that are numbers (NaN when there are none)."""
    present = [v for v in values if not math.isnan(v)]
    return statistics.median(present) if present else math.nan
