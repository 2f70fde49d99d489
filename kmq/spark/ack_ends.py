"""The ok rows of an acknowledgement task, kept as Arrow columns, and the END markers they become.

Nearly every row of a healthy pipeline is `ok`: they never become Python objects one by one. With the `batch` marker
format a task's ok rows are one BATCH END per queue partition (more only past a record's limits, PROTOCOL.md "Batch
markers"); with `kmq` one END per row.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from kmq.batch_markers import contiguous_runs, split_runs
from kmq.marker_writer import MarkerWriter


class OkOffsets:
    """The (partition, offset) of the ok rows seen so far."""

    def __init__(self) -> None:
        self._partitions: list[pa.Array] = []
        self._offsets: list[pa.Array] = []
        self.rows = 0

    def add(self, partitions: pa.Array, offsets: pa.Array) -> None:
        self._partitions.append(partitions.cast(pa.int32()))
        self._offsets.append(offsets.cast(pa.int64()))
        self.rows += len(offsets)

    def by_partition(self) -> dict[int, list[int]]:
        """Each partition's offsets, ascending, each once (a row acked twice is one END)."""
        if not self.rows:
            return {}
        partitions = pa.chunked_array(self._partitions, type=pa.int32())
        offsets = pa.chunked_array(self._offsets, type=pa.int64())
        found: dict[int, list[int]] = {}
        for partition in sorted(pc.unique(partitions).to_pylist()):
            mine = offsets.filter(pc.equal(partitions, partition))
            found[partition] = pc.unique(pc.take(mine, pc.sort_indices(mine))).to_pylist()
        return found

    def write(self, markers: MarkerWriter) -> None:
        """Produce their ENDs (not waiting): BATCH ENDs with the `batch` format, else one kmq END per offset."""
        for partition, offsets in self.by_partition().items():
            if markers.config.marker_format == "batch":
                for runs in split_runs(contiguous_runs(offsets)):
                    markers.batch_end(partition, runs)
            else:
                for offset in offsets:
                    markers.end_at(partition, offset)
