"""The executor's read loop of the kmq source (no Spark needed): a chunk's START markers are acknowledged before the
chunk is handed on, though the next chunk's STARTs are already in flight by then."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from kmq.delivery import Failures
from kmq.marker_writer import StartWriter
from kmq.markers import MarkerKey, StartMarker, decode_marker
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.spark import reading
from kmq.spark.offsets import OffsetRange
from tests.conftest import MakeConfig
from tests.helpers import read_topic


class _Recording(StartWriter):
    """The StartWriter that records what it was asked, in order: ("produce", offsets) and ("waited", offsets)."""

    events: ClassVar[list[tuple[str, list[int]]]] = []

    def produce(self, offsets: Any, redeliver_after_ms: int) -> Failures:
        self.events.append(("produce", [o for chunk in offsets.values() for o in chunk]))
        return super().produce(offsets, redeliver_after_ms)

    def wait(self, failures: Failures, timeout_s: float) -> None:
        super().wait(failures, timeout_s)
        self.events.append(("waited", [o for kind, chunk in self.events if kind == "produce" for o in chunk]))


def test_every_chunk_is_handed_on_only_once_its_starts_are_acknowledged(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(partitions=1, marker_format="kmq")  # one START record per row: readable one by one
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(b"x", None, None, 0) for _ in range(50))
    monkeypatch.setattr(reading, "StartWriter", _Recording)
    monkeypatch.setattr(_Recording, "events", [])
    chunks = reading.read_range(config, config.queue_topic, OffsetRange(0, 5, 45), 10)
    handed: list[int] = []
    in_flight_while_handed = 0
    for chunk in reading.with_starts(config, chunks, 30_000):
        offsets = [record.offset() or 0 for record in chunk]
        waited = [done for kind, done in _Recording.events if kind == "waited"]
        assert waited and set(offsets) <= set(waited[-1]), f"chunk at {offsets[0]} handed on before its STARTs"
        in_flight_while_handed += _Recording.events[-1][0] == "produce"  # the next chunk's STARTs already sent
        handed.extend(offsets)
    assert handed == list(range(5, 45))  # exactly the range, in order, each row once
    assert in_flight_while_handed == 3  # 4 chunks: the next chunk's round trip overlapped each of the first 3
    started = {
        MarkerKey.decode(record.key).offset
        for record in read_topic(config, config.markers_topic, 1)
        if isinstance(decode_marker(record.value), StartMarker)
    }
    assert set(handed) <= started  # and they are on the markers topic
