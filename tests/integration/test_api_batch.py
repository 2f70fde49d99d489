"""The REST facade serving a queue with `marker_format="batch"`: receive writes BATCH STARTs, ack writes one BATCH
END per partition and issue time (with the `kmq-receipt` note, so a receipt still settles once, at every replica and
after restarts), and the tracker redelivers what HTTP clients leave unacknowledged."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from fastapi.testclient import TestClient

from kmq.batch_markers import BatchEnd, BatchStart, decode_batch_marker, is_batch_value, offsets_in
from kmq.config import KmqConfig
from kmq.markers import MarkerKey
from kmq_api.app import create_app
from kmq_api.receipts import Receipt, ReceiptSigner
from kmq_api.settlements import HEADER, Note
from kmq_api.state import ApiState
from kmq_tracker import TrackerConfig, TrackerService
from tests.helpers import Record, read_topic, tracker_settled, wait_for
from tests.integration.test_api_endpoints import AUTH, SECRET, api_config, receive, send, settle
from tests.integration.test_api_hostile import conflict

MakeConfig = Callable[..., KmqConfig]


def test_receive_writes_batch_starts_and_unacked_messages_come_back(make_config: MakeConfig) -> None:
    # 4 s: the ack of the first 7 must land before their deadline even on a loaded machine (at 1.5 s a loaded CI
    # run got acked messages back, most likely redelivered because the ack came after their deadline)
    queue = make_config(partitions=2, marker_format="batch", msg_timeout_ms=4000)
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
            wait_for(lambda: tracker_settled(tracker), 10, what="all ended")
            assert tracker.metrics.value("kmq_redeliveries_total") == 3
    finally:
        tracker.stop()


def test_a_receive_answers_only_once_its_starts_are_stored(make_config: MakeConfig) -> None:
    # The facade signs receipts and encodes its answer while the STARTs are on their way: the answer itself must
    # still wait for their acknowledgement (a receipt may be settled on another replica at once).
    queue = make_config(partitions=2, marker_format="batch")
    watch = Consumer({**queue.kafka_settings(), "group.id": f"test-watermarks-{uuid.uuid4().hex[:8]}"})
    try:
        with TestClient(create_app(api_config(queue)), headers=AUTH) as http:
            send(http, queue, *(f"v{i}" for i in range(40)))
            received = 0
            deadline = time.monotonic() + 30
            while received < 40:
                assert time.monotonic() < deadline, f"received {received} of 40"
                stored_before = _stored_markers(watch, queue)
                request = {"max_messages": 7, "wait_ms": 2000}  # several receives, each on one or both partitions
                response = http.post(f"/v1/queues/{queue.queue_topic}/receive", json=request)
                # the moment a receive answers, its BATCH STARTs (one per partition it delivers from) are stored
                stored_after = _stored_markers(watch, queue)
                assert response.status_code == 200, response.text
                messages = response.json()["messages"]
                assert stored_after - stored_before == len({m["partition"] for m in messages})
                received += len(messages)
    finally:
        watch.close()


def _stored_markers(watch: Consumer, queue: KmqConfig) -> int:
    """Records on the markers topic that the broker has acknowledged (its high watermarks, asked afresh)."""
    ends = [
        watch.get_watermark_offsets(TopicPartition(queue.markers_topic, p), timeout=10, cached=False) for p in (0, 1)
    ]
    return sum(high for _, high in ends)


# -- ack: BATCH ENDs that keep "a receipt settles once" ------------------------------------------------------------

PARTITIONS = 2


@pytest.fixture
def queue(make_config: MakeConfig) -> KmqConfig:
    config: KmqConfig = make_config(partitions=PARTITIONS, marker_format="batch")
    return config


def batch_ends(queue: KmqConfig) -> list[tuple[Record, BatchEnd, Note | None]]:
    """Every BATCH END on the markers topic, with its decoded note (None: none)."""
    found = []
    for record in read_topic(queue, queue.markers_topic, PARTITIONS):
        if is_batch_value(record.value):
            marker = decode_batch_marker(MarkerKey.decode(record.key).offset, record.value)
            if isinstance(marker, BatchEnd):
                notes = [Note.decode(value) for name, value in record.headers if name == HEADER]
                found.append((record, marker, notes[0] if notes else None))
    return found


def issued_at(queue: KmqConfig, message: dict[str, Any]) -> int:
    receipt = ReceiptSigner(SECRET.encode()).verify(message["receipt"], queue.queue_topic)
    assert isinstance(receipt, Receipt)
    return receipt.issued_at_ms


def test_an_ack_writes_one_noted_batch_end_per_partition_and_receive(queue: KmqConfig) -> None:
    with TestClient(create_app(api_config(queue)), headers=AUTH) as http:
        send(http, queue, *(f"a{i}" for i in range(8)))
        first = receive(http, queue, 8)
        send(http, queue, *(f"b{i}" for i in range(6)))
        second = receive(http, queue, 6)
        # one request acks the receipts of two receives (two issue times), in no particular order
        mixed = first[::2] + second + first[1::2]
        results = settle(http, queue, "ack", [m["receipt"] for m in mixed])
        assert [(r["status"], r["partition"], r["offset"]) for r in results] == [
            ("ok", m["partition"], m["offset"]) for m in mixed
        ]
        ends = batch_ends(queue)
    # one record per (partition, issue time), its note naming the deliveries of exactly its offsets
    expected = {(m["partition"], issued_at(queue, m), m["offset"]) for m in mixed}
    assert len(ends) == len({(partition, issued) for partition, issued, _ in expected})
    covered = set()
    for record, marker, note in ends:
        assert note is not None
        assert note.action == "ack"
        covered |= {(record.partition, note.issued_at_ms, offset) for offset in offsets_in(marker.runs)}
    assert covered == expected


@pytest.mark.parametrize(("first", "first_body"), [("ack", {}), ("nack", {"delay_ms": 0})])
def test_a_receipt_settles_once_whether_acked_in_a_batch_end_or_nacked(
    queue: KmqConfig, first: str, first_body: dict[str, Any]
) -> None:
    with TestClient(create_app(api_config(queue)), headers=AUTH) as http:
        send(http, queue, *(f"v{i}" for i in range(4)))
        messages = receive(http, queue, 4)
        assert {r["status"] for r in settle(http, queue, first, [m["receipt"] for m in messages], **first_body)} == {
            "ok"
        }
        written = read_topic(queue, queue.markers_topic, PARTITIONS)
        for message in messages:
            for action, body in [("ack", {}), ("nack", {"delay_ms": 0}), ("extend", {"visibility_timeout_ms": 60_000})]:
                assert f"already settled by {first}" in conflict(http, queue, action, [message["receipt"]], **body)
        # nothing was written for the refused settles
        assert len(read_topic(queue, queue.markers_topic, PARTITIONS)) == len(written)


def test_an_extended_delivery_acked_in_a_batch_end_refuses_its_other_receipts(queue: KmqConfig) -> None:
    with TestClient(create_app(api_config(queue)), headers=AUTH) as http:
        send(http, queue, "slow", "fast")
        slow, fast = receive(http, queue, 2)
        [extended] = settle(http, queue, "extend", [slow["receipt"]], visibility_timeout_ms=60_000)
        # the original receipt of the one and the extended receipt of the other, in one ack
        assert [r["status"] for r in settle(http, queue, "ack", [fast["receipt"], extended["receipt"]])] == ["ok"] * 2
        conflict(http, queue, "nack", [slow["receipt"]])
        conflict(http, queue, "extend", [extended["receipt"]], visibility_timeout_ms=60_000)


def test_batch_end_acks_survive_a_restart_and_are_shared_by_replicas(queue: KmqConfig) -> None:
    # given deliveries acked with BATCH ENDs at one replica, which is then shut down
    with TestClient(create_app(api_config(queue)), headers=AUTH) as first:
        send(first, queue, *(f"r{i}" for i in range(6)))
        messages = receive(first, queue, 6)
        acked, others = messages[:3], messages[3:]
        assert {r["status"] for r in settle(first, queue, "ack", [m["receipt"] for m in acked])} == {"ok"}
    with (
        TestClient(create_app(api_config(queue)), headers=AUTH) as restarted,
        TestClient(create_app(api_config(queue)), headers=AUTH) as replica,
    ):
        # then a restarted replica refuses to settle any of them again (it decoded the BATCH ENDs' runs)
        for message in acked:
            assert "already settled by ack" in conflict(restarted, queue, "nack", [message["receipt"]], delay_ms=0)
        # and what one running replica acks, the other refuses once it has read the BATCH ENDs
        assert {r["status"] for r in settle(restarted, queue, "ack", [m["receipt"] for m in others])} == {"ok"}
        state: ApiState = replica.app_state["kmq"]
        view = state.queues[queue.queue_topic].settled
        keys = [(MarkerKey(m["partition"], m["offset"]), issued_at(queue, m)) for m in others]
        wait_for(lambda: all(view.settled_by(k, t) == "ack" for k, t in keys), what="the replica to read the acks")
        for message in others:
            conflict(replica, queue, "extend", [message["receipt"]], visibility_timeout_ms=60_000)


def test_a_replica_remembers_settle_notes_105_s_past_their_deadline_by_default(queue: KmqConfig) -> None:
    # given a replica with the default write timeout (10 s: a settle waits at most 15 s for each of three steps)
    with TestClient(create_app(api_config(queue)), headers=AUTH) as client:
        state: ApiState = client.app_state["kmq"]
        # then its settle view keeps notes one minute plus those three waits past their deadline (PROTOCOL.md)
        assert state.queues[queue.queue_topic].settled.margin_ms == 105_000
