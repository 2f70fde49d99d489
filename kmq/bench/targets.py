"""The goals, checked against one run's medians (ratios come from the same rounds).

Throughput goals compare kmq-batch, the default, with the plain consumer committing synchronously per batch (its
ceiling in kind), with the plain consumer committing asynchronously (its true ceiling: kmq-batch's hand-over is
pipelined and its commits asynchronous) and with Kafka's own share-group consumer; per-message markers (kmq) have a
lower goal. With a handler that does real work (`--work-us 20`, every contender alike) kmq's own cost must all but
vanish. The tracker's ingest counts queue offsets, which a batch marker carries hundreds of, not marker records.
A goal whose contenders did not run shows "not measured".
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kmq.bench.options import (
    HTTP,
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
from kmq.bench.results import Row, Run, ratio

MB = 1_000_000
WORK_GOAL_US = 20  # the handler's work per message in the "with real work" goal


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

    batch_at_work, plain_at_work = variant(KMQ_BATCH, WORK_GOAL_US), variant(PLAIN, WORK_GOAL_US)
    return [
        Target("kmq-batch ÷ plain throughput", ratio(runs, KMQ_BATCH, PLAIN), ">=", 0.90, "x"),
        Target("kmq-batch ÷ share-group throughput", ratio(runs, KMQ_BATCH, SHARE), ">=", 1.0, "x"),
        Target("kmq-batch ÷ plain-async throughput", ratio(runs, KMQ_BATCH, PLAIN_ASYNC), ">=", 0.5, "x"),
        Target("kmq ÷ plain throughput", ratio(runs, KMQ, PLAIN), ">=", 0.5, "x"),
        Target(
            "kmq-batch ÷ plain CPU per message",
            row_value(KMQ_BATCH, "cpu_us_per_msg") / row_value(PLAIN, "cpu_us_per_msg"),
            "<=",
            1.3,
            "x",
        ),
        Target(
            f"kmq-batch ÷ plain throughput, handlers burning {WORK_GOAL_US} µs/msg",
            ratio(runs, batch_at_work, plain_at_work),
            ">=",
            0.97,
            "x",
        ),
        Target("http receive+ack", row_value(HTTP, "rate"), ">=", 15_000, "msgs/s"),
        Target("http ack p99", row_value(HTTP, "p99_ms"), "<=", 20.0, "ms"),
        *(target for work_us in _work_values(runs) for target in _worker_targets(runs, work_us)),
        Target("tracker queue offsets ingested", row_value(TRACKER, "rate"), ">=", 100_000, "offsets/s"),
        Target(f"tracker RSS, {tracker_pending:,} pending", row_value(TRACKER, "rss_bytes") / MB, "<=", 150, "MB"),
        Target("tracker redelivery lateness p99", row_value(TRACKER, "p99_ms"), "<=", 250.0, "ms"),
    ]


def _work_values(runs: Sequence[Run]) -> list[int]:
    """0 (always), and every other handler work per message the runs had."""
    return sorted({0, *(split_variant(run.contender)[1] for run in runs)})


def _worker_targets(runs: Sequence[Run], work_us: int) -> list[Target]:
    """The worker's goals at one handler work (the worker's threads matter most when handlers work)."""
    suffix = f", handlers burning {work_us} µs/msg" if work_us else ""

    def worker_ratio(numerator: str, denominator: str) -> float:
        return ratio(runs, variant(numerator, work_us), variant(denominator, work_us))

    # Like with like: the worker writes batch markers, as kmq-batch does.
    return [
        Target(f"worker ÷ kmq-batch throughput{suffix}", worker_ratio(WORKER, KMQ_BATCH), ">=", 0.8, "x"),
        Target(f"worker-key ÷ worker throughput{suffix}", worker_ratio(WORKER_KEY, WORKER), ">=", 0.9, "x"),
    ]
