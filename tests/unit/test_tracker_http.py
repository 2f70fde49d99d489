"""The probes server: /metrics, /healthz and /readyz on one port."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from kmq.errors import ConfigError
from kmq_tracker.http import MAX_CONNECTIONS, REQUEST_TIMEOUT_S, HealthServer
from kmq_tracker.metrics import TrackerMetrics
from tests.helpers import wait_for


@dataclass
class FakeStatus:
    is_alive: bool = True
    is_ready: bool = False

    def alive(self) -> bool:
        return self.is_alive

    def ready(self) -> bool:
        return self.is_ready

    def problem(self) -> str | None:
        return None


@pytest.fixture
def served() -> Iterator[tuple[str, FakeStatus, TrackerMetrics]]:
    status, metrics = FakeStatus(), TrackerMetrics()
    server = HealthServer("127.0.0.1", 0, metrics, status)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}", status, metrics
    finally:
        server.stop()


def test_metrics_are_exposed(served: tuple[str, FakeStatus, TrackerMetrics]) -> None:
    url, _, metrics = served
    metrics.redeliveries.inc(3)
    metrics.set_partition("q__markers", 1, pending=5, overdue_ms=1500, caught_up=True)
    metrics.lateness.observe(0.02)
    response = httpx.get(f"{url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    body = response.text
    assert "kmq_redeliveries_total 3.0" in body
    assert 'kmq_pending_messages{partition="1",topic="q__markers"} 5.0' in body
    assert 'kmq_oldest_pending_age_seconds{partition="1",topic="q__markers"} 1.5' in body
    assert 'kmq_partition_caught_up{partition="1",topic="q__markers"} 1.0' in body
    assert 'kmq_redelivery_lateness_seconds_bucket{le="0.025"} 1.0' in body
    for name in ("kmq_markers_consumed_total", "kmq_dead_letters_total", "kmq_undecodable_markers_total"):
        assert f"{name} 0.0" in body
    assert "kmq_missing_messages_total 0.0" in body


def test_dropped_partitions_leave_the_metrics(served: tuple[str, FakeStatus, TrackerMetrics]) -> None:
    url, _, metrics = served
    metrics.set_partition("q__markers", 1, pending=5, overdue_ms=0, caught_up=False)
    metrics.drop_partition("q__markers", 1)
    metrics.drop_partition("q__markers", 9)  # never seen: harmless
    assert "kmq_pending_messages{" not in httpx.get(f"{url}/metrics").text


def test_healthz_follows_the_loop(served: tuple[str, FakeStatus, TrackerMetrics]) -> None:
    url, status, _ = served
    assert httpx.get(f"{url}/healthz").status_code == 200
    status.is_alive = False
    assert httpx.get(f"{url}/healthz").status_code == 503


def test_readyz_follows_the_catch_up(served: tuple[str, FakeStatus, TrackerMetrics]) -> None:
    url, status, _ = served
    assert httpx.get(f"{url}/readyz").status_code == 503
    status.is_ready = True
    response = httpx.get(f"{url}/readyz?verbose=1")
    assert response.status_code == 200
    assert response.text == "caught up\n"


def test_unknown_paths_are_404(served: tuple[str, FakeStatus, TrackerMetrics]) -> None:
    url, _, _ = served
    assert httpx.get(f"{url}/").status_code == 404


def test_metrics_value_reads_samples() -> None:
    metrics = TrackerMetrics()
    assert metrics.value("kmq_redeliveries_total") == 0
    metrics.redeliveries.inc()
    assert metrics.value("kmq_redeliveries_total") == 1
    assert metrics.value("kmq_pending_messages", {"topic": "t", "partition": "0"}) == 0


def test_a_port_in_use_is_a_config_error_naming_the_setting() -> None:
    first = HealthServer("127.0.0.1", 0, TrackerMetrics(), FakeStatus())
    try:
        with pytest.raises(ConfigError, match=rf"http_port: cannot serve probes on 127.0.0.1:{first.port}"):
            HealthServer("127.0.0.1", first.port, TrackerMetrics(), FakeStatus())
    finally:
        first.stop()


def test_idle_connections_never_stall_the_probes(served: tuple[str, FakeStatus, TrackerMetrics]) -> None:
    url, status, _ = served
    status.is_ready = True
    port = int(url.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]  # connected, never sending a request
    try:
        for path in ("/healthz", "/metrics", "/readyz"):
            assert httpx.get(f"{url}{path}", timeout=1.0).status_code == 200
    finally:
        for connection in idle:
            connection.close()


def test_connections_past_the_limit_are_closed_and_probes_still_answer(
    served: tuple[str, FakeStatus, TrackerMetrics],
) -> None:
    url, _, _ = served
    port = int(url.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(MAX_CONNECTIONS + 4)]
    try:
        # the extra connections are closed by the server at once; the idle ones time out and free their slots
        wait_for(lambda: _probe_answers(f"{url}/healthz"), timeout_s=REQUEST_TIMEOUT_S + 5, what="a probe answer")
    finally:
        for connection in idle:
            connection.close()


def _probe_answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False
