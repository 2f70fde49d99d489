"""The REST facade's stall detector against the broker: a send that blocks (its produce held back) turns `/healthz`
503 after the stall timeout and logs what each thread waits on, once; when it finishes, `/healthz` is 200 again and
`kmq_api_last_progress_seconds` is 0. Probes and scrapes are not work: they answer meanwhile."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kmq.config import KmqConfig
from kmq_api.app import create_app
from kmq_api.delivery import AsyncProducer, Outcome, Record
from tests.helpers import wait_for
from tests.integration.test_api_endpoints import AUTH, api_config, send

MakeConfig = Callable[..., KmqConfig]
STACKS = "what each thread waits on"


def last_progress(http: TestClient) -> float:
    lines = [line for line in http.get("/metrics").text.splitlines() if line.startswith("kmq_api_last_progress")]
    assert len(lines) == 1, lines
    return float(lines[0].rsplit(" ", 1)[1])


def test_a_blocked_send_fails_healthz_and_logs_the_stacks(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    queue = make_config(partitions=1)
    release = threading.Event()
    real = AsyncProducer.produce

    async def held_produce(self: AsyncProducer, records: Sequence[Record]) -> list[Outcome]:
        await asyncio.to_thread(release.wait, 60)  # bounded: the test releases it
        return await real(self, records)

    monkeypatch.setattr(AsyncProducer, "produce", held_produce)
    caplog.set_level(logging.ERROR, logger="kmq.progress")
    with TestClient(create_app(api_config(queue, stall_timeout_ms=2_000)), headers=AUTH) as http:
        assert http.get("/healthz").status_code == 200
        sent: list[Any] = []
        sender = threading.Thread(target=lambda: sent.append(send(http, queue, "held")), daemon=True)
        sender.start()
        try:
            response = wait_for(
                lambda: (r := http.get("/healthz")).status_code == 503 and r, timeout_s=60, what="/healthz 503"
            )
            assert "no progress" in response.text
            assert last_progress(http) >= 2.0
            http.get("/healthz")
            logged = [r.getMessage() for r in caplog.records if STACKS in r.getMessage()]
            assert len(logged) == 1  # once per stall, with every thread's stack (the held one waits in Event.wait)
            assert 'Thread "MainThread"' in logged[0] and "in wait" in logged[0]
        finally:
            release.set()
            sender.join(60)
        assert len(sent) == 1 and not sender.is_alive()
        wait_for(lambda: http.get("/healthz").status_code == 200, timeout_s=30, what="/healthz 200")
        assert last_progress(http) == 0.0
