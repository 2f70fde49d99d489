"""A micro-batch's offset ranges, read from its streaming query's offset log: Spark's Kafka source plans [from,
until) per partition and Spark writes the plan to `<checkpoint>/offsets/<batchId>` before the batch runs.

The files are Spark's (`OffsetSeqLog`, version "v1"; the format checked against Spark 4.2.0, the version kmq's extra
pins): a version line, the batch's metadata, then one line per source of the query — the Kafka source's is
`{"<topic>": {"<partition>": <offset>, ...}}`. `offsets/<batchId>` holds the batch's ends, `offsets/<batchId - 1>`
its starts; the first batch starts where the Kafka source's initial offsets (`sources/<index>/0`) say. Parsing is
pure; `CheckpointFiles` reads them through Hadoop's file system, so any checkpoint location Spark takes works.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kmq.errors import OffsetLogError

SUPPORTED_VERSION = "v1"
Ranges = dict[int, tuple[int, int]]  # queue partition -> [from, until)
ReadFile = Callable[[str], "str | None"]  # a checkpoint-relative path -> its text, None when absent


@dataclass(frozen=True, slots=True)
class LoggedOffsets:
    """The per-source offsets of one offset-log file: None for a source with none logged ("-")."""

    sources: tuple[Mapping[str, object] | None, ...]


def parse_offset_log(text: str, where: str) -> LoggedOffsets:
    """One `offsets/<batchId>` file."""
    lines = text.split("\n")
    if lines[0] != SUPPORTED_VERSION:
        raise OffsetLogError(where, f"offset log version {lines[0][:20]!r}; kmq reads {SUPPORTED_VERSION}")
    if len(lines) < 2:
        raise OffsetLogError(where, "no metadata line")
    return LoggedOffsets(tuple(_source(line, where) for line in lines[2:] if line.strip()))


def parse_initial_offsets(text: str, where: str) -> Mapping[str, object]:
    """A Kafka source's `sources/<index>/0` file (its initial offsets): a version line, then the offsets' JSON."""
    version, _, body = text.lstrip("\x00").partition("\n")
    if version != SUPPORTED_VERSION:
        raise OffsetLogError(where, f"initial offsets version {version[:20]!r}; kmq reads {SUPPORTED_VERSION}")
    offsets = _source(body.strip(), where)
    if offsets is None:
        raise OffsetLogError(where, "no initial offsets")
    return offsets


def _source(line: str, where: str) -> Mapping[str, object] | None:
    if line.strip() == "-":
        return None
    try:
        offsets = json.loads(line)
    except json.JSONDecodeError as e:
        raise OffsetLogError(where, f"a source's offsets are not JSON: {e}") from e
    return offsets if isinstance(offsets, dict) else {}


def source_index(logged: LoggedOffsets, topic: str, where: str) -> int:
    """The index of the query's source that reads `topic` (exactly one must)."""
    found = [i for i, offsets in enumerate(logged.sources) if offsets is not None and topic in offsets]
    if len(found) != 1:
        raise OffsetLogError(where, f"{len(found)} sources of the query read {topic!r}; kmq needs exactly one")
    return found[0]


def topic_offsets(offsets: Mapping[str, object] | None, topic: str, where: str) -> dict[int, int]:
    """`{"<topic>": {"<partition>": offset}}` as partition -> offset."""
    found = offsets.get(topic) if offsets is not None else None
    if not isinstance(found, dict):
        raise OffsetLogError(where, f"no offsets of {topic!r}")
    try:
        return {int(partition): int(offset) for partition, offset in found.items()}
    except (TypeError, ValueError) as e:
        raise OffsetLogError(where, f"offsets of {topic!r} are not integers: {found}") from e


def batch_ranges(read: ReadFile, batch_id: int, topic: str, low: Callable[[int], int]) -> Ranges:
    """Batch `batch_id`'s non-empty [from, until) per partition of `topic`; `low(partition)` is where a partition
    the starts do not name (added since) begins, as Spark's Kafka source reads it from the earliest offset."""
    end_file = f"offsets/{batch_id}"
    end_text = read(end_file)
    if end_text is None:
        raise OffsetLogError(end_file, "not in the checkpoint: the query's offset log is written before its batch runs")
    ends_logged = parse_offset_log(end_text, end_file)
    index = source_index(ends_logged, topic, end_file)
    ends = topic_offsets(ends_logged.sources[index], topic, end_file)
    starts = _starts(read, batch_id, index, topic)
    ranges: Ranges = {}
    for partition, until in sorted(ends.items()):
        start = starts.get(partition, -1)
        if until <= 0:
            continue
        start = start if start >= 0 else low(partition)
        if until > start:
            ranges[partition] = (start, until)
    return ranges


def _starts(read: ReadFile, batch_id: int, index: int, topic: str) -> dict[int, int]:
    if batch_id > 0:  # Spark keeps the last spark.sql.streaming.minBatchesToRetain (100) batches' files
        previous = f"offsets/{batch_id - 1}"
        text = read(previous)
        if text is None:
            raise OffsetLogError(previous, "not in the checkpoint: the batch's start offsets are unknown")
        logged = parse_offset_log(text, previous)
        if index < len(logged.sources) and logged.sources[index] is not None:
            return topic_offsets(logged.sources[index], topic, previous)
    initial = f"sources/{index}/0"  # the first batch, or the source's first (a source added to the query)
    initial_text = read(initial)
    if initial_text is None:
        raise OffsetLogError(initial, "not in the checkpoint: the source's initial offsets are unknown")
    return topic_offsets(parse_initial_offsets(initial_text, initial), topic, initial)
