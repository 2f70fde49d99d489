"""A KmqClient whose construction fails leaves nothing running: the REST facade makes one per receive until one
works, so every failed attempt used to leak librdkafka threads and a batch-ends thread."""

from __future__ import annotations

import os
import threading

import pytest

import kmq._transactional
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.errors import TransactionalSetupError


def os_threads() -> list[str]:
    """The process's threads by name (librdkafka's are named rdk:...)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/comm") as comm:
            names.append(comm.read().strip())
    return sorted(names)


def test_a_transactional_client_that_cannot_start_raises_a_clear_error_and_leaks_no_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No broker listens on port 1: init_transactions times out (after 1 s instead of 30).
    monkeypatch.setattr(kmq._transactional, "_INIT_TIMEOUT_S", 1.0)
    config = KmqConfig(
        bootstrap_servers="127.0.0.1:1", queue_topic="t-setup", transactional=True, marker_format="batch"
    )
    setup_failed = r"transactional producer 't-setup__workers-.*' could not start"
    with pytest.raises(TransactionalSetupError, match=setup_failed) as first:
        KmqClient(config, check=False)
    assert "TransactionalId ACL" in str(first.value)
    os_before, python_before = os_threads(), threading.active_count()
    for _ in range(3):
        with pytest.raises(TransactionalSetupError):
            KmqClient(config, check=False)
    assert threading.active_count() == python_before, [t.name for t in threading.enumerate()]
    assert os_threads() == os_before, "librdkafka threads of the failed clients are still running"
