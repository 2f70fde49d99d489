"""`python -m kmq_api` as a process, configured from KMQ_* variables: serves, then stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable

import httpx

from kmq.config import KmqConfig
from tests.helpers import wait_for

MakeConfig = Callable[..., KmqConfig]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _ready(base_url: str, child: subprocess.Popen[str]) -> bool:
    assert child.poll() is None, f"the API exited with {child.returncode}"
    try:
        return httpx.get(f"{base_url}/readyz", timeout=1.0).status_code == 200
    except httpx.TransportError:
        return False


def test_python_m_api_serves_from_the_environment_and_stops_on_sigterm(make_config: MakeConfig) -> None:
    queue = make_config(partitions=2)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}
    env.update(
        {
            "KMQ_BOOTSTRAP_SERVERS": queue.bootstrap_servers,
            "KMQ_KAFKA_CONFIG": json.dumps(queue.kafka_config),
            "KMQ_CONSUMER_KAFKA_CONFIG": json.dumps(queue.consumer_kafka_config),
            "KMQ_API_QUEUES": queue.queue_topic,
            "KMQ_API_KEYS": "process-key",
            "KMQ_API_RECEIPT_SECRET": "process-test-secret-0123456789abcdef",
            "KMQ_API_HOST": "127.0.0.1",
            "KMQ_API_PORT": str(port),
        }
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "kmq_api", "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(base_url, child), timeout_s=30, what="python -m kmq_api to be ready")
        headers = {"Authorization": "Bearer process-key"}
        with httpx.Client(base_url=f"{base_url}/v1/queues/{queue.queue_topic}", headers=headers) as http:
            assert http.post("/messages", json={"messages": [{"value": "over HTTP"}]}).status_code == 200
            [message] = http.post("/receive", json={"wait_ms": 10_000}, timeout=15).json()["messages"]
            assert message["value"] == "over HTTP"
            assert http.post("/ack", json={"receipts": [message["receipt"]]}).json()["results"][0]["status"] == "ok"
        child.send_signal(signal.SIGTERM)
        _, log = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    # uvicorn shuts down gracefully (the lifespan flushes and closes the Kafka clients); the process exits 0.
    assert child.returncode == 0, log[-2000:]
    assert f"closing queue {queue.queue_topic}" in log
    assert "Traceback" not in log
