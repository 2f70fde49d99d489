"""The tracker's stall detector against the broker: a redelivery pass that blocks (the copy's write held back) turns
`/healthz` 503 after the stall timeout and logs what each thread waits on, once; when the pass ends, `/healthz` is 200
again and `kmq_tracker_last_progress_seconds` falls back to 0."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq_tracker.redeliverer import Redelivered, Redeliverer
from tests.helpers import wait_for
from tests.integration.test_tracker_e2e import receive, running_tracker, send
from tests.integration.test_worker_health import get

MakeConfig = Callable[..., KmqConfig]
STACKS = "what each thread waits on"


def test_a_blocked_redelivery_fails_healthz_and_logs_the_stacks(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(partitions=1, msg_timeout_ms=1_000)
    release = threading.Event()
    real = Redeliverer.redeliver

    def blocked_redeliver(self: Redeliverer, partition: int, offsets: Sequence[int]) -> Redelivered:
        release.wait(60)  # bounded: the test releases it
        return real(self, partition, offsets)

    monkeypatch.setattr(Redeliverer, "redeliver", blocked_redeliver)
    caplog.set_level(logging.ERROR, logger="kmq.progress")
    settings: dict[str, Any] = {"stall_timeout_ms": 2_000}
    with running_tracker(config, **settings) as tracker, KmqClient(config) as client:
        base = f"http://127.0.0.1:{tracker.http_port}"
        assert get(f"{base}/healthz")[0] == 200
        send(config, 1)
        assert len(receive(client, 1)) == 1  # left unacknowledged: due in 1 s, its pass blocks
        _, body = wait_for(lambda: (r := get(f"{base}/healthz"))[0] == 503 and r, timeout_s=60, what="503")
        assert "no progress" in body
        assert tracker.metrics.value("kmq_tracker_last_progress_seconds") >= 2.0
        get(f"{base}/healthz")
        logged = [r.getMessage() for r in caplog.records if STACKS in r.getMessage()]
        assert len(logged) == 1 and "blocked_redeliver" in logged[0]
        release.set()
        wait_for(lambda: get(f"{base}/healthz")[0] == 200, timeout_s=30, what="/healthz 200 after the pass")
        assert len(receive(client, 1)) == 1  # the copy came
        client.flush()
        wait_for(
            lambda: tracker.metrics.value("kmq_tracker_last_progress_seconds") == 0.0,
            timeout_s=30,
            what="the gauge back at 0",
        )
