"""STARTs naming offsets no message has (issue 15, item 2): negative, or past the partition's end. They are missing
(counted, ENDed) at once, found by comparing with the high watermark, never by waiting for a fetch to time out."""

from __future__ import annotations

from collections.abc import Callable

from kmq.config import KmqConfig
from kmq_tracker.config import TrackerConfig
from kmq_tracker.reader import QueueReader
from tests.integration.test_client import send

MakeConfig = Callable[..., KmqConfig]


def test_negative_and_past_the_end_offsets_are_missing_and_the_rest_is_read(make_config: MakeConfig) -> None:
    config = make_config(partitions=2)
    send(config, 5, partition=0)
    reader = QueueReader(TrackerConfig(kmq=config, read_timeout_ms=30_000))
    try:
        result = reader.read(0, [-5, 1, 3, 5, 10**12])
        assert [r.offset for r in result.found] == [1, 3]
        assert sorted(result.missing) == [-5, 5, 10**12]
        assert (result.unread, result.error) == ([], None)
        empty = reader.read(1, [0, 7])  # a partition with no message at all
        assert (empty.found, sorted(empty.missing), empty.unread) == ([], [0, 7], [])
        send(config, 3, partition=0)  # the end moves on: offsets 5..7 exist now
        assert [r.offset for r in reader.read(0, [5, 7, 8]).found] == [5, 7]
    finally:
        reader.close()
