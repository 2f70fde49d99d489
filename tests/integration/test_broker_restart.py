"""Apache Kafka crashed and restarted mid-stream on the same data: the client, the tracker and the REST facade carry
on, lost 0."""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.embedded import EmbeddedKafka
from kmq.errors import KmqError
from kmq.producer import KmqProducer, OutgoingMessage
from kmq_api.app import create_app
from kmq_api.config import ApiConfig
from kmq_tracker import TrackerConfig, TrackerService
from tests.conftest import backend_under_test, external_cluster_requested
from tests.helpers import wait_for

MESSAGES = 3000
HTTP_MESSAGES = 50
AUTH = {"Authorization": "Bearer restart-key"}


@pytest.fixture(scope="module")
def restartable() -> Iterator[EmbeddedKafka]:
    """A Kafka node of this module's own: the one each test stops and starts again (the session's serves the others).
    Each test leaves it running on its data; the next one restarts it once more, on topics of its own."""
    if external_cluster_requested() or backend_under_test() != "kafka":
        pytest.skip("restarting a broker on its data needs the embedded kafka backend (KMQ_TEST_BACKEND=kafka)")
    with EmbeddedKafka("kafka") as broker:
        yield broker


class Worker(threading.Thread):
    """A KmqClient loop as an application writes it: Kafka errors are logged by kmq, counted here, and retried."""

    def __init__(self, config: KmqConfig, drop_rate: float) -> None:
        super().__init__(name="restart-worker", daemon=True)
        self.config, self.drop_rate = config, drop_rate
        self.processed: set[bytes] = set()
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        rng = random.Random(7)
        with KmqClient(self.config) as client:
            while not self.stopping.is_set():
                try:
                    for msg in client.receive(max_messages=200, timeout_s=0.2):
                        if rng.random() >= self.drop_rate:
                            client.processed(msg)
                            self.processed.add(msg.value or b"")
                except KmqError as e:
                    self.errors.append(type(e).__name__)


@pytest.mark.parametrize("marker_format", ["kmq", "batch"])
def test_a_broker_restart_mid_stream_loses_nothing(restartable: EmbeddedKafka, marker_format: str) -> None:
    config = restartable.config(
        f"t-restart-{uuid.uuid4().hex[:8]}", msg_timeout_ms=2000, max_redeliveries=50, marker_format=marker_format
    )
    restartable.ensure_topics(config, 4)
    expected = {f"m{i}".encode() for i in range(MESSAGES)}
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(value) for value in sorted(expected))
    secret, key = "restart-test-secret-0123456789ab", SecretStr("restart-key")
    api = ApiConfig(queues=(config,), receipt_secret=secret, api_keys=(key,))
    tracker = TrackerService(TrackerConfig(kmq=config, http_port=0, commit_interval_ms=200)).run_in_thread()
    worker = Worker(config, drop_rate=0.05)
    try:
        assert tracker.wait_ready(60), "tracker not ready"
        worker.start()
        wait_for(lambda: len(worker.processed) >= MESSAGES // 3, 60, what="a third processed before the restart")
        # when the broker crashes mid-stream and comes back on the same data and port (a crash, not a polite stop:
        # a single node in controlled shutdown can answer Metadata with no broker at all, after which librdkafka
        # 2.16 drops every broker it knows and never re-bootstraps; docs/guides/operating.md)
        assert restartable.pid is not None, "the broker runs"
        os.kill(restartable.pid, signal.SIGKILL)
        restartable.stop(keep_data=True)
        down_at = time.monotonic()
        restartable.start()
        print(f"broker down for {time.monotonic() - down_at:.1f} s; worker errors meanwhile: {len(worker.errors)}")
        # then every message is processed, redelivered ones included, and the tracker kept going
        try:
            wait_for(lambda: worker.processed >= expected, 120, interval_s=0.2, what="every message processed")
        except AssertionError as e:
            missing = sorted(expected - worker.processed)
            raise AssertionError(
                f"{e}: {len(missing)} missing, e.g. {missing[:5]}; worker errors {worker.errors[-5:]}; "
                f"tracker alive {tracker.alive()}; the worker is at:\n{_stack(worker)}"
            ) from e
        assert tracker.alive(), "the tracker kept going through the restart"
        _stop(worker)
        # and the REST facade works on the restarted broker (with the worker gone, its receiver gets every partition)
        with TestClient(create_app(api), headers=AUTH) as http:
            _http_round_trip(http, config.queue_topic)
    finally:
        _stop(worker)
        tracker.stop()
    assert worker.processed >= expected, f"lost {len(expected - worker.processed)}"


def _stop(worker: Worker) -> None:
    worker.stopping.set()
    if worker.is_alive():
        worker.join(30)
        assert not worker.is_alive(), f"the worker did not stop within 30 s; it is at:\n{_stack(worker)}"


def _stack(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident or 0)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(gone)"


def _http_round_trip(http: TestClient, queue: str) -> None:
    """Send through the facade, then receive and ack: the messages it hands out include the HTTP ones."""
    path = f"/v1/queues/{queue}"
    values = [f"http-{i}" for i in range(HTTP_MESSAGES)]
    sent = http.post(f"{path}/messages", json={"messages": [{"value": v} for v in values]})
    assert sent.status_code == 200, sent.text
    seen: set[str] = set()

    def receive_and_ack() -> bool:
        answer = http.post(f"{path}/receive", json={"max_messages": 100, "wait_ms": 500})
        assert answer.status_code == 200, answer.text
        messages = answer.json()["messages"]
        if messages:
            acked = http.post(f"{path}/ack", json={"receipts": [m["receipt"] for m in messages]})
            assert acked.status_code == 200 and {r["status"] for r in acked.json()["results"]} <= {"ok"}, acked.text
        seen.update(m["value"] for m in messages)
        return seen >= set(values)

    wait_for(receive_and_ack, 60, interval_s=0, what="the HTTP messages received and acknowledged")
