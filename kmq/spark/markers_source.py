"""`spark.read.format("kmq-markers")`: the markers topic decoded by kmq's own codec, one row per queue offset.

A record of the kmq format is one row; a BATCH START or BATCH END (PROTOCOL.md, "Batch markers") is one row per
offset of its set, all at the record's marker offset and timestamp; a record that is not a marker is one row of kind
"invalid".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from confluent_kafka import Message as KafkaMessage
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kmq.admin import topic_partitions
from kmq.batch_markers import BATCH_END_TYPE, BATCH_START_TYPE, BatchStart, decode_batch_marker, offsets_in
from kmq.errors import MarkerDecodeError
from kmq.markers import MarkerKey, StartMarker, decode_marker
from kmq.spark.options import SourceOptions
from kmq.spark.reading import read_to_end

MARKERS_SCHEMA = (
    "partition int, marker_offset long, timestamp timestamp, queue_partition int, queue_offset long, "
    "kind string, redeliver_after_ms long"
)
MarkerRow = tuple[int | None, int | None, str, int | None]  # queue partition, queue offset, kind, redeliver_after_ms
Decoder = Callable[[bytes | None, bytes], list[MarkerRow]]
INVALID: MarkerRow = (None, None, "invalid", None)


def decode_kmq(key: bytes | None, value: bytes) -> list[MarkerRow]:
    """A kmq 0.3.x START or END."""
    marker_key = MarkerKey.decode(key)
    marker = decode_marker(value)
    if isinstance(marker, StartMarker):
        return [(marker_key.partition, marker_key.offset, "start", marker.redeliver_after_ms)]
    return [(marker_key.partition, marker_key.offset, "end", None)]


def decode_batch(key: bytes | None, value: bytes) -> list[MarkerRow]:
    """A BATCH START or BATCH END: the same rows as the kmq markers it stands for, one per offset of its set."""
    marker_key = MarkerKey.decode(key)
    marker = decode_batch_marker(marker_key.offset, value)
    if isinstance(marker, BatchStart):
        return [(marker_key.partition, o, "start", marker.redeliver_after_ms) for o in offsets_in(marker.runs)]
    return [(marker_key.partition, o, "end", None) for o in offsets_in(marker.runs)]


# By the value's first (type) byte.
DECODERS: dict[int, Decoder] = {
    0x00: decode_kmq,
    0x01: decode_kmq,
    BATCH_START_TYPE: decode_batch,
    BATCH_END_TYPE: decode_batch,
}


def decode(partition: int, key: bytes | None, value: bytes | None) -> list[MarkerRow]:
    """The rows of one record; not a marker (or a key naming another partition): one "invalid" row."""
    decoder = DECODERS.get(value[0]) if value else None
    if decoder is None or value is None:
        return [INVALID]
    try:
        rows = decoder(key, value)
    except MarkerDecodeError:
        return [INVALID]
    return rows if all(row[0] == partition for row in rows) else [INVALID]


class KmqMarkersDataSource(DataSource):
    """Options as format("kmq") (bootstrap.servers, queue, markers, kafka.*)."""

    @classmethod
    def name(cls) -> str:
        return "kmq-markers"

    def schema(self) -> str:
        return MARKERS_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return MarkersReader(SourceOptions.parse(self.options))


class MarkersReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        config = self.options.config
        return [InputPartition(p) for p in range(topic_partitions(config, config.markers_topic))]

    def read(self, partition: InputPartition) -> Iterator[tuple[object, ...]]:
        config = self.options.config
        for chunk in read_to_end(config, config.markers_topic, partition.value, self.options.chunk_size):
            yield from _rows(chunk)


def _rows(chunk: list[KafkaMessage]) -> Iterator[tuple[object, ...]]:
    from datetime import UTC, datetime

    for record in chunk:
        partition, offset = record.partition() or 0, record.offset() or 0
        stamp = datetime.fromtimestamp(record.timestamp()[1] / 1000, tz=UTC)
        for queue_partition, queue_offset, kind, after_ms in decode(partition, record.key(), record.value()):
            yield partition, offset, stamp, queue_partition, queue_offset, kind, after_ms
