"""`kmq.spark.foreach_batch`: the kmq client flow (PROTOCOL.md) once per micro-batch, on the driver.

1. The micro-batch's offset ranges [from, until) per queue partition, from the query's offset log (`batch_offsets`):
   no Spark job, no read of the rows.
2. One BATCH START per partition, acknowledged by every in-sync replica (acks=all) before the handler sees a row.
3. The handler runs; the rows it returns as not ok are nacked or dead-lettered (`not_ok`).
4. One BATCH END per partition for every other offset of the batch, then the kmq group's offsets committed (the
   rest of kmq — `kmq audit`, lag — sees the stream's progress; Spark's checkpoint stays the truth on restart).
   Neither is waited for here: the next micro-batch waits for them before its STARTs (by then they are long
   acknowledged), and `close()` when the query has stopped, so kmq's round trips stay off the stream's path.

A micro-batch Spark replays after a restart writes its STARTs again, then its ENDs: a START after the earlier END
makes its rows pending again until the new END, so nothing is lost and nothing is redelivered once the END is
durable. kmq neither persists nor caches the batch (a handler that reads it twice may). Only the `batch` marker
format is written: a range of millions of offsets is one BATCH START, where the `kmq` format would be a record per
offset, so `marker_format="kmq"` is refused when `foreach_batch` is made.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import DataFrame

from kmq.batch_markers import split_runs
from kmq.errors import ConfigError, DeliveryError, MarkerWriteError
from kmq.marker_writer import MarkerWriter, StartWriter
from kmq.spark.batch_offsets import BatchRuns, CheckpointFiles, batch_runs, checkpoint_files, ends_of, without
from kmq.spark.not_ok import collect_not_ok, write_not_ok
from kmq.spark.options import SourceOptions
from kmq.spark.python_exec import ensure_python

Handler = Callable[[DataFrame, int], "DataFrame | None"]
_log = logging.getLogger(__name__)
_WAIT_S = 30.0


class MarkedBatches:
    """The callable for `.writeStream.foreachBatch(...)`; its Kafka clients live as long as the query's driver."""

    def __init__(self, handler: Handler, options: SourceOptions, raw_options: Mapping[str, str]) -> None:
        if options.config.marker_format != "batch":
            raise ConfigError("marker_format", f"foreach_batch writes BATCH markers only (a START per micro-batch and "
                              f"partition); {options.config.marker_format!r} is not supported here: leave "
                              "marker_format out or set it to 'batch' (the tracker reads both formats)")  # fmt: skip
        self.handler = handler
        self.options = options
        self._raw_options = dict(raw_options)
        self._starts: StartWriter | None = None
        self._ends: MarkerWriter | None = None
        self._positions: Any = None  # kmq.spark.positions.QueuePositions, made at the first batch
        self._files: CheckpointFiles | None = None  # the running query's checkpoint
        # The last micro-batch's cost of kmq (the bench reports them): reading its offsets from the offset log, and
        # writing its markers and committing (the driver's Kafka round trips).
        self.last_offsets_ms = 0
        self.last_marker_ms = 0

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        if self._starts is None:
            self._open(batch_df)
        self._handle(batch_df, batch_id)

    def _handle(self, batch: DataFrame, batch_id: int) -> None:
        began = time.monotonic()
        self._files = checkpoint_files(batch, self._files)
        runs = batch_runs(self._files, batch_id, self.options.config.queue_topic, self._positions.low)  # 1.
        self.last_offsets_ms = round((time.monotonic() - began) * 1000)
        began = time.monotonic()
        self._settle_ends()  # the previous micro-batch's ENDs and commit, long acknowledged by now
        self._write_starts(runs)  # 2.
        marker_s = time.monotonic() - began
        not_ok = collect_not_ok(self.handler(batch, batch_id), runs)  # 3.
        write_not_ok(batch, not_ok, self._raw_options)
        began = time.monotonic()
        self._write_ends(without(runs, ((a.partition, a.offset) for a in not_ok)))  # 4.
        self._positions.commit(ends_of(runs), asynchronous=True)
        self.last_marker_ms = round((marker_s + time.monotonic() - began) * 1000)
        _log.debug("micro-batch %d: %d partitions, %d not ok; offsets %d ms, markers %d ms", batch_id, len(runs),
                   len(not_ok), self.last_offsets_ms, self.last_marker_ms)  # fmt: skip

    def _open(self, batch_df: DataFrame) -> None:
        """The driver's clients, made at the first micro-batch: the topics are checked (as every kmq client checks
        them at start), and `kmq-ack` is registered for the not-ok rows."""
        from kmq.spark.ack_sink import KmqAckDataSource
        from kmq.spark.positions import QueuePositions

        spark = batch_df.sparkSession
        ensure_python(spark)
        spark.dataSource.register(KmqAckDataSource)
        config = self.options.config
        self._positions = QueuePositions(config)
        self._starts = StartWriter(config)
        self._ends = MarkerWriter(config)

    def _write_starts(self, runs: BatchRuns) -> None:
        assert self._starts is not None
        if not runs:
            return
        offsets = {p: range(r[0][0], r[0][0] + r[0][1]) for p, r in runs.items()}  # one range per partition
        failures = self._starts.produce(offsets, self.options.config.msg_timeout_ms)
        try:
            self._starts.wait(failures, _WAIT_S)
        except DeliveryError as e:  # nothing handled, nothing committed: Spark fails the batch, a restart replays it
            partition, partition_runs = next(iter(runs.items()))
            raise MarkerWriteError(self.options.config.markers_topic, partition, partition_runs[0][0], str(e)) from e

    def _write_ends(self, runs: BatchRuns) -> None:
        """Produce the ENDs; they are waited for when the next micro-batch begins (`_settle_ends`), not here: the
        round trip would hold up the stream, and a lost END only costs a redelivery."""
        ends = self._ends
        assert ends is not None
        for partition, partition_runs in runs.items():
            for piece in split_runs(partition_runs):
                ends.batch_end(partition, piece)

    def _settle_ends(self) -> None:
        """Wait for the ENDs in flight and check the last asynchronous commit: a cluster away this long stops the
        query loudly."""
        assert self._ends is not None
        remaining = self._ends.flush(_WAIT_S)
        if remaining:
            raise DeliveryError(self.options.config.markers_topic, None, f"{remaining} END markers not acknowledged")
        self._positions.check_commits()

    def close(self) -> None:
        """Flush and drop the driver's clients, once the query has stopped (else the process's end does it); a later
        micro-batch makes new ones."""
        for writer in (self._starts, self._ends):
            if writer is not None:
                writer.flush(_WAIT_S)
        if self._positions is not None:
            self._positions.close()  # waits for the last commit
        self._starts, self._ends, self._positions = None, None, None
