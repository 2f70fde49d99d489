"""The REST facade serving a queue with `marker_format="batch"`: receive writes BATCH STARTs, and the tracker
redelivers what HTTP clients leave unacknowledged (acks stay per-receipt kmq ENDs, which end batch offsets too)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from api.app import create_app
from kmq.batch_markers import BatchStart, decode_batch_marker, is_batch_value, offsets_in
from kmq.config import KmqConfig
from kmq.markers import MarkerKey
from tests.helpers import read_topic, wait_for
from tests.integration.test_api_endpoints import AUTH, api_config, receive, send, settle
from tracker import TrackerConfig, TrackerService

MakeConfig = Callable[..., KmqConfig]


def test_receive_writes_batch_starts_and_unacked_messages_come_back(make_config: MakeConfig) -> None:
    queue = make_config(partitions=2, marker_format="batch", msg_timeout_ms=1500)
    tracker = TrackerService(TrackerConfig(kmq=queue, http_enabled=False, commit_interval_ms=200)).run_in_thread()
    try:
        assert tracker.wait_ready(30)
        with TestClient(create_app(api_config(queue)), headers=AUTH) as http:
            send(http, queue, *(f"v{i}" for i in range(10)))
            first = receive(http, queue, 10)
            starts = []
            for record in read_topic(queue, queue.markers_topic, 2):
                if is_batch_value(record.value):
                    marker = decode_batch_marker(MarkerKey.decode(record.key).offset, record.value)
                    assert isinstance(marker, BatchStart)
                    starts += [(record.partition, o) for o in offsets_in(marker.runs)]
            assert sorted(starts) == sorted((m["partition"], m["offset"]) for m in first)
            acked, left = first[:7], first[7:]
            results = settle(http, queue, "ack", [m["receipt"] for m in acked])
            assert {r["status"] for r in results} == {"ok"}
            # the three left unacknowledged come back once, as copies, after their deadline
            copies = receive(http, queue, 3, wait_ms=5000)
            settle(http, queue, "ack", [m["receipt"] for m in copies])
            assert sorted(m["value"] for m in copies) == sorted(m["value"] for m in left)
            wait_for(lambda: sum(s.pending for s in tracker.partitions().values()) == 0, 10, what="all ended")
            assert tracker.metrics.value("kmq_redeliveries_total") == 3
    finally:
        tracker.stop()
