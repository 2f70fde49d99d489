"""The tracker's queue reader on a real broker: point reads never wait out the user's long fetch waits."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer

import kmq_tracker.reader as reader_module
from kmq.producer import KmqProducer, OutgoingMessage
from kmq_tracker.config import TrackerConfig
from kmq_tracker.reader import QueueReader
from tests.conftest import MakeConfig


def test_reads_of_separate_runs_do_not_wait_for_the_fetch_parked_at_the_end(make_config: MakeConfig) -> None:
    # given workers whose consumers long-poll (a fetch waits up to 30 s for data) and a 5 s read timeout
    config = make_config(partitions=1, consumer_kafka_config={"fetch.wait.max.ms": 30_000})
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(f"m{i}".encode(), partition=0) for i in range(2000))
    reader = QueueReader(TrackerConfig(kmq=config, http_enabled=False, read_timeout_ms=5000))
    try:
        for first in (0, 1000, 1999, 10):
            # when runs far apart are read, each re-assigning the partition while a fetch sits at its end
            result = reader.read(0, [first, 1999])
            # then every one is found within the timeout (a parked 30 s fetch would leave them unread)
            assert (sorted(r.offset for r in result.found), result.unread) == (sorted({first, 1999}), []), result
    finally:
        reader.close()


def test_the_reader_fetches_nothing_between_reads(make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a partition holding 40 MB, and a reader whose librdkafka statistics come every 100 ms
    config = make_config(partitions=1)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(b"x" * 1000, partition=0) for _ in range(40_000))
    reports: list[dict[str, Any]] = []

    def consumer(conf: dict[str, Any]) -> Consumer:
        return Consumer({**conf, "statistics.interval.ms": 100, "stats_cb": lambda s: reports.append(json.loads(s))})

    monkeypatch.setattr(reader_module, "Consumer", consumer)
    reader = QueueReader(TrackerConfig(kmq=config, http_enabled=False, read_timeout_ms=5000))
    try:
        # when three offsets at its start are read
        assert [r.offset for r in reader.read(0, [0, 1, 2]).found] == [0, 1, 2]
        # then, over 10 statistics reports after the next one, the reader fetches no more (what it holds stays as it
        # was) and holds at most 2 MiB and one fetch response: librdkafka's defaults would fill its queue with up to
        # 64 MiB
        seen = len(reports) + 1
        deadline = time.monotonic() + 30
        while len(reports) < seen + 10 and time.monotonic() < deadline:
            reader._consumer.poll(0.05)  # serves the statistics callback
        assert len(reports) >= seen + 10, f"{len(reports) - seen} statistics reports in 30 s"
        held = [sum(p.get("fetchq_size", 0) for p in _partitions(r, config.queue_topic)) for r in reports[seen:]]
        assert len(set(held)) == 1 and held[0] <= 3 * 2**20, held
    finally:
        reader.close()


def _partitions(report: dict[str, Any], topic: str) -> list[dict[str, Any]]:
    return list(report.get("topics", {}).get(topic, {}).get("partitions", {}).values())
