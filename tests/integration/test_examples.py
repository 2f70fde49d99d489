"""Smoke tests of examples/: each script runs to completion with small counts against a real broker."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kmq.embedded import KafkaCluster
from tests.integration.test_demo import Output, demo, unless_stand_in

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(script: str, *args: str, env: dict[str, str] | None = None, timeout_s: float = 60) -> str:
    """Run an example script to completion; its output (the test fails on a non-zero exit)."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture
def broker_env(kafka: Any) -> dict[str, str]:
    """The variables that point a script at the test broker, as a user would export them."""
    return {
        "KMQ_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "KMQ_KAFKA_CONFIG": json.dumps(kafka.kafka_config),
        "KMQ_CONSUMER_KAFKA_CONFIG": json.dumps(kafka.consumer_kafka_config),
    }


def fresh_queue(kafka: Any, prefix: str, create: bool = True) -> str:
    """A new queue; its topics made through the fixture when `create` or on the mock broker (no CreateTopics)."""
    queue = f"{prefix}-{uuid.uuid4().hex[:8]}"
    if create or kafka.backend == "mock":
        kafka.ensure_topics(kafka.config(queue), 4)
    return queue


def test_embedded_example_runs_the_whole_flow_in_one_script() -> None:
    # No broker given: it starts its own (or uses KMQ_BOOTSTRAP_SERVERS when the suite runs on a cluster).
    out = run(
        "embedded/embedded_example.py", "--messages", "20", "--drop-every", "5", "--msg-timeout-ms", "1000",
        "--marker-format", "kmq",
    )  # fmt: skip
    assert "done: all 20 messages processed; 4 of them were delivered again after a drop" in out, out
    assert "is back (redelivery 1)" in out


def start(script: str, *args: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], Output]:
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLES / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
    )
    return process, Output(process)


def test_standalone_sender_processor_and_tracker_in_three_processes(kafka: Any, broker_env: dict[str, str]) -> None:
    queue = ["--queue", fresh_queue(kafka, "standalone")]
    tracker, tracker_out = start("standalone/tracker.py", *queue, env=broker_env)
    processor: subprocess.Popen[str] | None = None
    try:
        tracker_out.wait_for(r"tracking standalone-", timeout_s=30)
        drops = ["--drop-rate", "0.2", "--seed", "7", "--msg-timeout-ms", "1000"]
        processor, processor_out = start("standalone/processor.py", *queue, "--count", "30", *drops, env=broker_env)
        assert "sent 30 messages" in run("standalone/sender.py", *queue, "--count", "30", env=broker_env)
        # Seed 7 drops several of the first 30 deliveries: the processor ends only once the tracker brought them back.
        assert processor.wait(timeout=60) == 0, processor_out.text
        processor_out.close()
        assert "processed 30 distinct messages" in processor_out.text
        assert re.search(r"processed b'message-\d+' \(redelivery 1\)", processor_out.text), processor_out.text
        # Ctrl-C stops the tracker cleanly.
        tracker.send_signal(signal.SIGINT)
        assert tracker.wait(timeout=60) == 0, tracker_out.text
        tracker_out.close()
        assert "tracker stopped" in tracker_out.text
    finally:
        for process in (tracker, processor):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
            if process is not None and process.stdout is not None:
                process.stdout.close()


def test_asyncio_worker_processes_everything_it_sent(kafka: Any, broker_env: dict[str, str]) -> None:
    queue = fresh_queue(kafka, "asyncio", create=False)  # the script creates the topics itself
    out = run("asyncio/async_worker.py", "--queue", queue, "--send", "200", "--concurrency", "20", env=broker_env)
    assert "processed 200 distinct messages" in out, out


@pytest.fixture(scope="module")
def running_demo(tmp_path_factory: pytest.TempPathFactory, kafka: KafkaCluster) -> Iterator[dict[str, str]]:
    """`kmq demo --keep-running` on the session's broker (a JVM start less): the trackers and REST facade the http
    examples talk to; its exports."""
    logs = tmp_path_factory.mktemp("demo-logs")
    args = ("--messages", "200", "--msg-timeout-ms", "1000", "--keep-running")
    with demo(*args, log_dir=logs, cluster=unless_stand_in(kafka)) as (process, output):
        output.wait_for("Ctrl-C stops them all", timeout_s=120)
        export = output.wait_for(r"^export (.*)$", timeout_s=1)[1]
        yield dict(pair.split("=", 1) for pair in shlex.split(export))
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0, output.text


@pytest.mark.needs(shutil.which("curl") is not None, "curl is not installed")
def test_http_example_with_curl(running_demo: dict[str, str]) -> None:
    done = subprocess.run(
        [str(EXAMPLES / "http/curl.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **running_demo},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    received = json.loads(done.stdout.split("== receive (long poll up to 5 s)\n", 1)[1].split("\n", 1)[0])
    assert received["messages"][0]["value"] == "hello from curl"
    assert '"status":"ok"' in done.stdout


def test_http_example_python_client(running_demo: dict[str, str]) -> None:
    out = run("http/client.py", env=running_demo)
    assert "received 'order 2' again (redelivery 1)" in out, out
    assert "acknowledged it: ok" in out
