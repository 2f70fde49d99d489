"""A tracker whose host clock is 30 s ahead of the broker's, or 30 s behind, redelivers on the broker's clock: no copy
before its deadline (the START's LogAppendTime plus the timeout), each within a second after it.

The tracker runs in a child process with `clock_offset_ms` (a setting for tests only) shifting its wall clock:
libfaketime cannot stand in for a skewed host here, as it breaks librdkafka's timed waits (measured under
`FAKETIME=+30s`: `poll(1.0)` returned at once, so the client spun; under `-30s` it returned after 0.2 s).

The broker, this test and its consumer share the machine's clock: a copy received at local time R was appended by
the broker at or before R. So R < deadline shows an early copy for certain; the late side allows, beyond the second,
`CONSUME_SLACK_MS` for the copy to reach this test's consumer."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kmq import headers as h
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.markers import MarkerKey, StartMarker, decode_marker
from kmq_tracker.config import TrackerConfig
from kmq_tracker.process import TrackerProcess
from tests.helpers import read_topic
from tests.integration.test_tracker_e2e import send

MakeConfig = Callable[..., KmqConfig]
TIMEOUT_MS = 4_000
MESSAGES = 20
PARTITIONS = 2
LATE_MS = 1_000
CONSUME_SLACK_MS = 500


@pytest.mark.parametrize("offset_ms", [30_000, -30_000], ids=["ahead-30s", "behind-30s"])
def test_redeliveries_follow_the_brokers_clock(make_config: MakeConfig, tmp_path: Path, offset_ms: int) -> None:
    config = make_config(partitions=PARTITIONS, msg_timeout_ms=TIMEOUT_MS, marker_format="kmq")
    tracker_config = TrackerConfig(kmq=config, commit_interval_ms=200, clock_offset_ms=offset_ms)
    with TrackerProcess(tracker_config, tmp_path / "tracker.log") as tracker, KmqClient(config) as client:
        tracker.wait_ready(60)
        send(config, MESSAGES)
        originals = 0
        copies: dict[tuple[int, int], int] = {}  # (partition, original offset) -> local time received
        deadline = time.monotonic() + 60
        while len(copies) < MESSAGES:
            assert time.monotonic() < deadline, f"{len(copies)} of {MESSAGES} copies in 60 s\n{tracker.log_tail()}"
            for msg in client.receive(max_messages=100, timeout_s=0.05):
                if msg.redelivery_count == 0:
                    originals += 1  # left unacknowledged
                else:
                    copies[(msg.partition, h.original_offset(msg.headers, msg.offset))] = time.time_ns() // 1_000_000
                    client.processed(msg)
        client.flush()
    assert originals == MESSAGES
    deadlines = {}
    for record in read_topic(config, config.markers_topic, PARTITIONS):
        marker = decode_marker(record.value)
        key = MarkerKey.decode(record.key)
        if isinstance(marker, StartMarker) and record.value == StartMarker(TIMEOUT_MS).encode():
            deadlines.setdefault((key.partition, key.offset), record.timestamp_ms + TIMEOUT_MS)
    lateness = {key: received - deadlines[key] for key, received in copies.items()}
    early = {key: ms for key, ms in lateness.items() if ms < 0}
    late = {key: ms for key, ms in lateness.items() if ms > LATE_MS + CONSUME_SLACK_MS}
    assert not early, f"copies before their deadline (ms late, negative: early): {early}"
    assert not late, f"copies later than {LATE_MS} ms (+{CONSUME_SLACK_MS} ms to reach the consumer): {late}"
