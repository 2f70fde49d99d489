"""A worker with batch markers killed or stopped with acknowledgements still gathered: SIGKILL loses the unwritten
BATCH END, so the tracker redelivers those messages (nothing lost); SIGTERM through `close()` writes it (nothing
redelivered)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.producer import KmqProducer, OutgoingMessage
from kmq_tracker import TrackerConfig, TrackerService
from tests.helpers import committed_offsets, tracker_settled, wait_for
from tests.integration.test_client_batch import ended

MakeConfig = Callable[..., KmqConfig]
COUNT = 40
# Receives COUNT messages, acknowledges every one, says so, then waits to be signalled. SIGTERM exits through the
# `with` block, which closes the client; SIGKILL leaves no chance to.
WORKER = f"""
import signal, sys, time
from kmq.client import KmqClient
from kmq.config import KmqConfig
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
with KmqClient(KmqConfig.from_env()) as client:
    got = []
    while len(got) < {COUNT}:
        got += client.receive(max_messages={COUNT} - len(got), timeout_s=0.2)
    client.processed_many(got)
    print("acked", flush=True)
    while True:
        time.sleep(0.05)
"""


def start_worker(config: KmqConfig) -> subprocess.Popen[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}, **config.to_env()}
    return subprocess.Popen([sys.executable, "-c", WORKER], env=env, stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_acks_gathered_by_a_stopped_worker(make_config: MakeConfig, stop: signal.Signals) -> None:
    # an hour-long end_flush_ms: the acknowledgements stay gathered until the worker closes (or dies)
    config = make_config(partitions=2, marker_format="batch", end_flush_ms=3_600_000, msg_timeout_ms=1500)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(f"m{i}".encode()) for i in range(COUNT))
    tracker = TrackerService(TrackerConfig(kmq=config, http_enabled=False, commit_interval_ms=200))
    tracker.run_in_thread()
    worker = start_worker(config)
    try:
        assert tracker.wait_ready(30)
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "acked"
        # Pipelined, the offsets are committed a moment after the hand-over (once the STARTs are acknowledged): a
        # kill before that would have the group read the originals again, and this test is about the ENDs.
        wait_for(lambda: sum(max(0, o) for o in committed_offsets(config, 2).values()) == COUNT, 30, what="commit")
        worker.send_signal(stop)
        assert worker.wait(timeout=30) == (0 if stop == signal.SIGTERM else -signal.SIGKILL)
        if stop == signal.SIGTERM:
            # close() wrote the BATCH ENDs, for every message: the tracker redelivers nothing, even past the deadlines
            assert len(ended(config, partitions=2)) == COUNT
            wait_for(lambda: tracker_settled(tracker), 10, what="the ENDs")
            past = time.monotonic() + 2.0  # the 1.5 s deadlines pass: the assertion is that nothing happens then
            wait_for(lambda: time.monotonic() > past, 5, what="the deadlines passed")
            assert tracker.metrics.value("kmq_redeliveries_total") == 0
            return
        # the ENDs died with the worker: every message comes back, once, and nothing is lost
        with KmqClient(config.with_overrides(end_flush_ms=100)) as client:
            copies: list[bytes | None] = []
            deadline = time.monotonic() + 30
            while len(copies) < COUNT:
                assert time.monotonic() < deadline, f"{len(copies)} of {COUNT} redelivered"
                batch = client.receive(max_messages=COUNT, timeout_s=0.2)
                client.processed_many(batch)
                copies += [m.value for m in batch]
        assert sorted(copies) == sorted(f"m{i}".encode() for i in range(COUNT))
        wait_for(lambda: tracker_settled(tracker), 10, what="the copies' ENDs")
        assert tracker.metrics.value("kmq_redeliveries_total") == COUNT
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
        if worker.stdout is not None:
            worker.stdout.close()
        tracker.stop()
