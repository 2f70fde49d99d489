"""The issue's targets, checked against one run's medians (ratios come from the same rounds)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kmq.bench.options import HTTP, JVM_KMQ, KMQ, KMQ_BATCH, PLAIN, SHARE, TRACKER, WORKER
from kmq.bench.results import Row, Run, ratio

MB = 1_000_000


@dataclass(frozen=True, slots=True)
class Target:
    """`measured` compared with `limit` (NaN: not measured in this run)."""

    name: str
    measured: float
    comparison: str  # ">=" or "<="
    limit: float
    unit: str

    @property
    def status(self) -> str:
        if math.isnan(self.measured):
            return "not measured"
        compare: Callable[[float, float], bool] = operator.ge if self.comparison == ">=" else operator.le
        return "met" if compare(self.measured, self.limit) else "missed"


def targets(runs: Sequence[Run], table: Sequence[Row], tracker_pending: int) -> list[Target]:
    by_name = {row.contender: row for row in table}

    def row_value(contender: str, attribute: str) -> float:
        row = by_name.get(contender)
        return math.nan if row is None else float(getattr(row, attribute))

    return [
        Target("kmq ÷ plain throughput", ratio(runs, KMQ, PLAIN), ">=", 0.90, "x"),
        Target("kmq-batch ÷ plain throughput", ratio(runs, KMQ_BATCH, PLAIN), ">=", 0.90, "x"),
        Target("kmq ÷ share-group throughput", ratio(runs, KMQ, SHARE), ">=", 1.5, "x"),
        Target("kmq ÷ JVM kmq throughput", ratio(runs, KMQ, JVM_KMQ), ">=", 1.0, "x"),
        Target("kmq p95 batch overhead", row_value(KMQ, "p95_ms"), "<=", 10.0, "ms"),
        Target("tracker markers ingested", row_value(TRACKER, "rate"), ">=", 100_000, "markers/s"),
        Target(f"tracker RSS, {tracker_pending:,} pending", row_value(TRACKER, "rss_bytes") / MB, "<=", 150, "MB"),
        Target("tracker redelivery lateness p99", row_value(TRACKER, "p99_ms"), "<=", 250.0, "ms"),
        Target("http receive+ack", row_value(HTTP, "rate"), ">=", 15_000, "msgs/s"),  # issue 12 (batch markers)
        Target("http ack p99", row_value(HTTP, "p99_ms"), "<=", 20.0, "ms"),
        Target("worker ÷ kmq throughput", ratio(runs, WORKER, KMQ), ">=", 0.8, "x"),
    ]
