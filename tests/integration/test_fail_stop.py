"""No component dies half-way (issue 29): an unexpected error in a thread or task of the worker, the tracker or the
REST facade stops that component as a whole — its consumer leaves the group, the process exits non-zero (a
supervisor restarts it) and says why — and `Worker.run_in_thread()` callers see the error.

The error is injected into the real processes by a small module run before the command: it breaks one method once a
trigger file exists, so the test first waits for the component to be up (in its group), then pulls the trigger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kmq.aio import AsyncKmqClient
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.embedded._ports import free_port
from kmq.errors import WorkerFailedError
from kmq.kafka import admin_settings
from kmq.worker import Worker, WorkerConfig
from kmq.worker.async_path import AsyncPath
from kmq.worker.runtime import Worker as RuntimeWorker
from tests.helpers import wait_for
from tests.integration.test_worker import send_numbers

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]
EXIT_S = 60
# Breaks `module:Class.method` (FAULT_TARGET) once the file FAULT_TRIGGER_FILE exists, then runs the command.
FAULT = textwrap.dedent(
    """
    import importlib, os, sys

    def install():
        module, _, attribute = os.environ["FAULT_TARGET"].partition(":")
        owner_name, _, method = attribute.partition(".")
        owner = getattr(importlib.import_module(module), owner_name)
        original, trigger = getattr(owner, method), os.environ["FAULT_TRIGGER_FILE"]

        def broken(*args, **kwargs):
            if os.path.exists(trigger):
                raise RuntimeError("injected fault in " + attribute)
            return original(*args, **kwargs)

        setattr(owner, method, broken)
    """
)
HANDLER = "def handle(msg):\n    pass\n"


def group_members(config: KmqConfig, group: str) -> int | None:
    """Members of `group` now; None while the broker cannot say (a group not created yet: NOT_COORDINATOR)."""
    admin = AdminClient(admin_settings(config))
    [described] = admin.describe_consumer_groups([group]).values()
    try:
        return len(described.result(timeout=10).members)
    except KafkaException:
        return None


@contextmanager
def faulty(
    tmp_path: Path, target: str, command: list[str], env: dict[str, str]
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """`command` (a module's `main` and its arguments) in a child process with `target` broken on the trigger."""
    (tmp_path / "fault.py").write_text(FAULT)
    (tmp_path / "jobs.py").write_text(HANDLER)
    trigger = tmp_path / "trigger"
    module, function, *args = command
    code = f"import fault; fault.install(); from {module} import {function}; {function}()"
    env = {**os.environ, **env, "FAULT_TARGET": target, "FAULT_TRIGGER_FILE": str(trigger)}
    log = tmp_path / "child.log"
    with log.open("a") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", code, *args], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    try:
        yield child, trigger
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)


def said(tmp_path: Path) -> str:
    return (tmp_path / "child.log").read_text(errors="replace")


@pytest.mark.parametrize(
    "target",
    [
        "kmq.worker.runtime:Worker._tend",  # the lease thread
        "kmq.worker.core:WorkerCore._count_ok",  # a handler thread (queued chunks and quick runs alike)
        "kmq.worker.runtime:Worker._turn",  # a receiving turn (the loop's, or a handler thread's: quick handlers)
    ],
)
def test_a_worker_thread_that_dies_stops_the_worker_process(
    make_config: MakeConfig, tmp_path: Path, target: str
) -> None:
    config = make_config(partitions=2)
    send_numbers(config, 20)
    command = ["kmq.cli", "main", "worker", "jobs:handle", "--concurrency", "2"]
    with faulty(tmp_path, target, command, config.to_env()) as (child, trigger):
        wait_for(lambda: group_members(config, config.group_id) == 1, 30, what="the worker in its group")
        send_numbers(config, 20)
        trigger.touch()
        send_numbers(config, 20)  # something for the loop and the handlers to do
        code = child.wait(EXIT_S)
    log = said(tmp_path)
    assert code == 1, log
    assert "injected fault" in log and "worker stopped cleanly" not in log, log
    assert group_members(config, config.group_id) == 0


def test_run_in_thread_callers_see_what_killed_the_worker(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(partitions=1)

    armed = threading.Event()
    tend = RuntimeWorker._tend

    def broken(self: RuntimeWorker, client: KmqClient) -> None:
        if armed.is_set():
            raise RuntimeError("injected fault in the lease thread")
        tend(self, client)

    worker = Worker(lambda msg: None, config, settings=WorkerConfig(concurrency=2))
    monkeypatch.setattr(RuntimeWorker, "_tend", broken)
    thread = worker.run_in_thread()
    wait_for(lambda: group_members(config, config.group_id) == 1, 30, what="the worker in its group")
    armed.set()
    thread.join(EXIT_S)
    assert not thread.is_alive(), "the worker went on without its lease thread"
    assert isinstance(worker.failure, WorkerFailedError)
    assert "kmq-leases" in str(worker.failure) and "injected fault" in str(worker.failure.__cause__)
    assert group_members(config, config.group_id) == 0


def test_an_async_worker_whose_task_dies_stops_and_says_which(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(partitions=1)

    async def handle(msg: object) -> None:
        return None

    armed = threading.Event()
    tend = AsyncPath._tend

    async def broken(self: AsyncPath, client: AsyncKmqClient) -> None:
        if armed.is_set():
            raise RuntimeError("injected fault in the lease task")
        await tend(self, client)

    worker = Worker(handle, config, settings=WorkerConfig(concurrency=2))
    monkeypatch.setattr(AsyncPath, "_tend", broken)
    thread = worker.run_in_thread()
    wait_for(lambda: group_members(config, config.group_id) == 1, 30, what="the worker in its group")
    armed.set()
    thread.join(EXIT_S)
    assert not thread.is_alive(), "the worker went on without its lease task"
    assert isinstance(worker.failure, WorkerFailedError)
    assert "kmq-leases" in str(worker.failure) and "injected fault" in str(worker.failure.__cause__)
    assert group_members(config, config.group_id) == 0


def test_a_tracker_whose_loop_dies_leaves_its_group_and_exits_non_zero(make_config: MakeConfig, tmp_path: Path) -> None:
    config = make_config(partitions=2)
    group = f"{config.markers_topic}__tracker"
    command = ["kmq_tracker.cli", "main", "--http-port", str(free_port()), "--http-host", "127.0.0.1"]
    with faulty(tmp_path, "kmq_tracker.loop:Loop.turn", command, config.to_env()) as (child, trigger):
        wait_for(lambda: group_members(config, group) == 1, 30, what="the tracker in its group")
        trigger.touch()
        code = child.wait(EXIT_S)
    log = said(tmp_path)
    assert code == 1, log
    assert "injected fault" in log and "tracker stopped by an unexpected error" in log, log
    assert group_members(config, group) == 0


@pytest.mark.parametrize(
    "target",
    [
        "kmq_api.settle_view:SettleView._read",  # the thread reading settles back
        "kmq_api.served:ServedQueue.leave_if_idle",  # the housekeeping task
    ],
)
def test_a_facade_whose_background_work_dies_stops_and_exits_non_zero(
    make_config: MakeConfig, tmp_path: Path, target: str
) -> None:
    queue = make_config(partitions=2)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}
    env.update(
        {
            "KMQ_BOOTSTRAP_SERVERS": queue.bootstrap_servers,
            "KMQ_KAFKA_CONFIG": json.dumps(queue.kafka_config),
            "KMQ_CONSUMER_KAFKA_CONFIG": json.dumps(queue.consumer_kafka_config),
            "KMQ_API_QUEUES": queue.queue_topic,
            "KMQ_API_KEYS": "fault-key",
            "KMQ_API_RECEIPT_SECRET": "fault-test-secret-0123456789abcdef",
            "KMQ_API_HOST": "127.0.0.1",
            "KMQ_API_PORT": str(port),
        }
    )
    base = f"http://127.0.0.1:{port}"
    with faulty(tmp_path, target, ["kmq_api.cli", "main", "--log-level", "info"], env) as (child, trigger):
        wait_for(lambda: _status(f"{base}/readyz") == 200, 30, what="the API ready")
        # a receive joins the queue's worker group through this replica
        headers = {"Authorization": "Bearer fault-key"}
        response = httpx.post(f"{base}/v1/queues/{queue.queue_topic}/receive", json={"wait_ms": 0}, headers=headers)
        assert response.status_code == 200, response.text
        wait_for(lambda: group_members(queue, queue.group_id) == 1, 30, what="the replica's receiver in the group")
        trigger.touch()
        code = child.wait(EXIT_S)
    log = said(tmp_path)
    assert code == 1, log
    assert "injected fault" in log and "this API replica stops" in log, log
    assert group_members(queue, queue.group_id) == 0


def _status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.TransportError:
        return None
