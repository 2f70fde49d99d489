"""The offsets of a micro-batch, per queue partition, as runs (PROTOCOL.md "Batch markers"), taken from its
streaming query's offset log (`offset_log`): no Spark job and no read of the rows.

Why the offset log: Spark's Kafka source plans each micro-batch as [from, until) per partition and writes the plan to
`<checkpoint>/offsets/<batchId>` before the batch runs, so the ranges are known before the handler sees a row and are
exactly what Spark reads — a batch Spark runs again after a failure or a restart reads the same ranges. Finding them
in the rows instead costs a second pass over the data (the batch persisted and aggregated). A range of a
`read_committed` read also holds offsets that are no row (transaction markers, aborted records); their STARTs and
ENDs are harmless, and the tracker settles an expired START of one without a redelivery (PROTOCOL.md).

The query is found by the id Spark gives the batch's thread (`sql.streaming.queryId`) among the default session's
active queries (a query started on another session is found if that session is the default one).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyspark.sql import DataFrame

from kmq.batch_markers import Run
from kmq.errors import OffsetLogError
from kmq.spark.offset_log import batch_ranges

BatchRuns = dict[int, tuple[Run, ...]]  # queue partition -> its offsets in the micro-batch
_KEPT = 2  # checkpoint files kept in memory: a batch's and the one before


def batch_runs(files: CheckpointFiles, batch_id: int, topic: str, low: Callable[[int], int]) -> BatchRuns:
    """The micro-batch's [from, until) per partition of `topic`, one run each (empty partitions left out)."""
    ranges = batch_ranges(files.read, batch_id, topic, low)
    return {partition: ((start, until - start),) for partition, (start, until) in ranges.items()}


def checkpoint_files(batch: DataFrame, known: CheckpointFiles | None) -> CheckpointFiles:
    """The checkpoint of the query running `batch`: `known` if it is that query's (a lookup in the JVM each micro-
    batch would cost several py4j round trips), else the query's own."""
    query_id = batch.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
    if known is not None and known.query_id == query_id:
        return known
    return CheckpointFiles(batch, query_id)


class CheckpointFiles:
    """The running query's checkpoint, read through Hadoop's file system (local, HDFS, object stores: as Spark).

    The last files read are kept: Spark writes an offset-log file once and never changes it, and each micro-batch
    reads the file of the batch before it, which the previous micro-batch read as its own."""

    def __init__(self, batch: DataFrame, query_id: str | None) -> None:
        session = batch.sparkSession
        self._jvm: Any = session._jvm  # py4j: Spark's own JVM gateway
        self._hadoop_conf = session._jsc.hadoopConfiguration()  # classic PySpark (py4j)
        self.query_id = query_id
        self.root = self._checkpoint_root(query_id)
        self._recent: dict[str, str] = {}

    def _checkpoint_root(self, query_id: str | None) -> str:
        if not query_id:
            raise OffsetLogError("-", "foreach_batch runs outside a streaming query (no sql.streaming.queryId)")
        default = self._jvm.org.apache.spark.sql.SparkSession.getDefaultSession()
        query = default.get().streams().get(query_id) if default.isDefined() else None
        if query is None:
            raise OffsetLogError("-", f"query {query_id} is not among the default Spark session's active queries")
        return str(query.streamingQuery().resolvedCheckpointRoot())

    def read(self, relative: str) -> str | None:
        text = self._recent.get(relative)
        if text is None:
            text = self._read(relative)
            if text is not None:
                self._recent = {**dict(list(self._recent.items())[-(_KEPT - 1) :]), relative: text}
        return text

    def _read(self, relative: str) -> str | None:
        path = self._jvm.org.apache.hadoop.fs.Path(f"{self.root}/{relative}")
        fs = path.getFileSystem(self._hadoop_conf)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()


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
    """The runs with the `gone` offsets cut out: work per hole, not per offset (a range may hold millions)."""
    pieces: list[Run] = []
    for start, length in runs:
        cursor = start
        for hole in sorted(offset for offset in gone if start <= offset < start + length):
            if hole > cursor:
                pieces.append((cursor, hole - cursor))
            cursor = hole + 1
        if cursor < start + length:
            pieces.append((cursor, start + length - cursor))
    return tuple(pieces)


def ends_of(runs: Mapping[int, tuple[Run, ...]]) -> dict[int, int]:
    """Per partition, the offset after its last run: where the kmq group moves once the batch is settled."""
    return {partition: partition_runs[-1][0] + partition_runs[-1][1] for partition, partition_runs in runs.items()}
