"""The worker's stall detector against the broker: a handler that blocks turns `/healthz` 503 after the stall
timeout, logs what each thread waits on (once), and `kmq_worker_last_progress_seconds` grows; once the handler
returns, `/healthz` answers 200 again and the gauge falls back to 0."""

from __future__ import annotations

import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from kmq.config import KmqConfig
from kmq.message import Message
from kmq.producer import KmqProducer
from kmq.worker import Worker, WorkerConfig
from kmq.worker.http import WorkerHttp
from tests.helpers import wait_for

MakeConfig = Callable[..., KmqConfig]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def last_progress(base: str) -> float:
    lines = [line for line in get(f"{base}/metrics")[1].splitlines() if line.startswith("kmq_worker_last_progress")]
    assert len(lines) == 1, lines
    return float(lines[0].rsplit(" ", 1)[1])


def test_a_blocked_handler_fails_healthz_and_logs_the_stacks(
    make_config: MakeConfig, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(partitions=1, msg_timeout_ms=30_000)
    release = threading.Event()
    handled: list[bytes | None] = []

    def blocking_handler(msg: Message) -> None:
        release.wait(60)  # bounded: the test releases it
        handled.append(msg.value)

    worker = Worker(blocking_handler, config, settings=WorkerConfig(concurrency=1, stall_timeout_ms=2_000))
    http = WorkerHttp(worker, 0, host="127.0.0.1")
    http.start()
    base = f"http://127.0.0.1:{http.port}"
    thread = worker.run_in_thread()
    try:
        assert get(f"{base}/healthz")[0] == 200
        with KmqProducer(config) as producer:
            producer.send(b"stuck")
        caplog.set_level(logging.ERROR, logger="kmq.progress")
        _, body = wait_for(lambda: (r := get(f"{base}/healthz"))[0] == 503 and r, timeout_s=60, what="503")
        assert "no progress" in body
        assert last_progress(base) >= 2.0
        stall_logs = [r for r in caplog.records if "what each thread waits on" in r.getMessage()]
        assert len(stall_logs) == 1 and "blocking_handler" in stall_logs[0].getMessage()
        get(f"{base}/healthz")
        assert len([r for r in caplog.records if "what each thread waits on" in r.getMessage()]) == 1  # once
        release.set()
        wait_for(lambda: get(f"{base}/healthz")[0] == 200, timeout_s=30, what="/healthz 200 after progress")
        wait_for(lambda: last_progress(base) == 0.0, timeout_s=30, what="the gauge back at 0")
        assert handled == [b"stuck"]
    finally:
        release.set()
        worker.stop()
        thread.join(60)
        http.stop()
    assert not thread.is_alive()
