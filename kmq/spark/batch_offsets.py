"""The exact offsets of a micro-batch, per queue partition, as runs (PROTOCOL.md "Batch markers"), found on the
cluster by Spark SQL: only a few numbers per partition reach the driver.

Why the rows and not the micro-batch's offset ranges (Spark's offset log, the query's progress): a range [from,
until) of a `read_committed` read holds offsets that are no row — transaction markers, aborted records — and a
BATCH START must cover exactly the rows the handler sees (an offset that is no row would be "redelivered" by the
tracker as a message retention removed). Per partition, min, max and count tell a contiguous range (the usual case:
one run) in one small aggregation; only a partition with gaps has its runs found by a second query (gaps and
islands: offset - rank is constant along a run).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F  # Spark's convention

from kmq.batch_markers import Run, runs_of

BatchRuns = dict[int, tuple[Run, ...]]  # queue partition -> its offsets in the micro-batch


def batch_runs(batch: DataFrame) -> BatchRuns:
    """The runs of the batch's (partition, offset) pairs, each partition's ascending."""
    stats = batch.groupBy("partition").agg(
        F.min("offset").alias("first"), F.max("offset").alias("last"), F.count("*").alias("rows")
    )
    runs: BatchRuns = {}
    gappy: list[int] = []
    for row in stats.collect():
        if row["partition"] is None or row["first"] is None:
            continue
        if row["rows"] == row["last"] - row["first"] + 1:
            runs[row["partition"]] = ((row["first"], row["rows"]),)
        else:
            gappy.append(row["partition"])
    if gappy:
        runs.update(_islands(batch, gappy))
    return dict(sorted(runs.items()))


def _islands(batch: DataFrame, partitions: list[int]) -> BatchRuns:
    offsets = batch.where(F.col("partition").isin(partitions)).select("partition", "offset").distinct()
    island = F.col("offset") - F.row_number().over(Window.partitionBy("partition").orderBy("offset"))
    found = (
        offsets.withColumn("island", island)
        .groupBy("partition", "island")
        .agg(F.min("offset").alias("first"), F.count("*").alias("length"))
        .collect()
    )
    runs: dict[int, list[Run]] = {}
    for row in found:
        runs.setdefault(row["partition"], []).append((row["first"], row["length"]))
    return {partition: tuple(sorted(pieces)) for partition, pieces in runs.items()}


def contains(runs: tuple[Run, ...], offset: int) -> bool:
    """Whether `offset` is in the (ascending, disjoint) runs."""
    at = bisect.bisect_right(runs, (offset, float("inf"))) - 1
    return at >= 0 and runs[at][0] <= offset < runs[at][0] + runs[at][1]


def without(runs: BatchRuns, removed: Iterable[tuple[int, int]]) -> BatchRuns:
    """The runs less the (partition, offset) pairs `removed`; a partition left empty is dropped."""
    by_partition: dict[int, set[int]] = {}
    for partition, offset in removed:
        by_partition.setdefault(partition, set()).add(offset)
    kept: BatchRuns = {}
    for partition, partition_runs in runs.items():
        gone = by_partition.get(partition)
        kept[partition] = _cut(partition_runs, gone) if gone else partition_runs
    return {partition: left for partition, left in kept.items() if left}


def _cut(runs: tuple[Run, ...], gone: set[int]) -> tuple[Run, ...]:
    pieces: list[Run] = []
    for start, length in runs:
        holes = sorted(offset for offset in gone if start <= offset < start + length)
        if not holes:
            pieces.append((start, length))
            continue
        pieces.extend(runs_of(offset for offset in range(start, start + length) if offset not in gone))
    return tuple(pieces)


def ends_of(runs: Mapping[int, tuple[Run, ...]]) -> dict[int, int]:
    """Per partition, the offset after its last run: where the kmq group moves once the batch is settled."""
    return {partition: partition_runs[-1][0] + partition_runs[-1][1] for partition, partition_runs in runs.items()}
