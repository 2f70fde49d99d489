"""The figures of one Spark bench run, from the query's progress events: pure, no Spark.

Two rates per run. End to end: every row ÷ the time from `start()` until the progress counted them all, so the
query's start-up (Spark spawning Python processes for a Python data source, the first offsets) is in it. Steady
state: rows ÷ summed batch durations (`batchDuration`, as Spark reports it) over the micro-batches after the first,
the rate a stream that runs for hours sees once started. Both contenders are aggregated the same way."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["end_to_end", "steady"]
KINDS: tuple[Kind, ...] = ("end_to_end", "steady")


@dataclass(frozen=True, slots=True)
class SparkRun:
    """One contender's run: all rows and the time from start(), and the part after the first micro-batch."""

    rows: int
    elapsed_ms: int  # start() until every row was counted
    batches: int  # micro-batches that read rows
    steady_rows: int  # rows of the micro-batches after the first
    steady_ms: int  # their batch durations, summed
    batch_ms: tuple[int, ...] = ()  # each micro-batch's duration, in order (the JSON's detail)
    add_batch_ms: tuple[int, ...] = ()  # of which running its tasks into the sink (durationMs.addBatch)
    offsets_ms: tuple[int, ...] = ()  # spark-kmq: reading each micro-batch's ranges from the offset log
    marker_ms: tuple[int, ...] = ()  # spark-kmq: writing each micro-batch's markers and committing the group

    def median_cost_ms(self, name: str) -> float:
        """The median over the micro-batches of `offsets_ms` or `marker_ms`; NaN without any."""
        values = getattr(self, name)
        return float(statistics.median(values)) if values else float("nan")

    def rate(self, kind: Kind) -> float:
        """Rows/s; NaN where there is nothing to divide (one micro-batch, no steady state)."""
        rows, ms = (self.rows, self.elapsed_ms) if kind == "end_to_end" else (self.steady_rows, self.steady_ms)
        return rows * 1000 / ms if rows > 0 and ms > 0 else float("nan")


def run_from_progress(progress: Iterable[Mapping[str, Any]], elapsed_ms: int) -> SparkRun:
    """A run from its progress events (StreamingQueryProgress is a dict); a batch reported twice counts once."""
    by_batch = {int(event["batchId"]): event for event in progress}
    batches = [by_batch[batch_id] for batch_id in sorted(by_batch) if int(by_batch[batch_id]["numInputRows"]) > 0]
    later = batches[1:]
    return SparkRun(
        rows=sum(int(event["numInputRows"]) for event in batches),
        elapsed_ms=elapsed_ms,
        batches=len(batches),
        steady_rows=sum(int(event["numInputRows"]) for event in later),
        steady_ms=sum(int(event["batchDuration"]) for event in later),
        batch_ms=tuple(int(event["batchDuration"]) for event in batches),
        add_batch_ms=tuple(int(event.get("durationMs", {}).get("addBatch", 0)) for event in batches),
    )


def median_ratio(ratios: list[float]) -> float:
    """The median of the rounds' ratios that could be measured; NaN if none."""
    measured = [ratio for ratio in ratios if ratio == ratio]  # NaN != NaN
    return statistics.median(measured) if measured else float("nan")
