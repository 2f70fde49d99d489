"""The broker frozen (SIGSTOP) for 10 s while messages flow, then resumed: nothing is lost; the time until messages
are processed again is printed (issue 15, fault tests)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from kmq.config import KmqConfig
from kmq.demo.sending import Sender
from kmq.embedded import KafkaCluster
from tests.faults.flow import accounted, running_flow, wait_accounted
from tests.helpers import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.integration]
MakeConfig = Callable[..., KmqConfig]
MESSAGES = 4_000
FREEZE_AFTER = 200  # processed before the freeze
# The flow processes thousands of messages a second: half of them are sent only once the broker is frozen (the
# producer waits with them), so messages are in flight on both sides of the freeze, not just redeliveries.
SENT_BEFORE = MESSAGES // 2
FREEZE_S = 10.0


def first_result_after(config: KmqConfig, results: str, since_ms: int, timeout_s: float = 90.0) -> int:
    """The timestamp of the first record on the results topic written at or after `since_ms` (a worker processed
    a message again)."""
    consumer = Consumer({**config.kafka_settings(), "group.id": f"{results}-probe", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(results, p, OFFSET_BEGINNING) for p in range(4)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for record in consumer.consume(500, 0.2):
                stamp = record.timestamp()[1]
                if record.error() is None and stamp >= since_ms:
                    return int(stamp)
        raise AssertionError(f"no message processed within {timeout_s:.0f}s of the broker resuming")
    finally:
        consumer.close()


@pytest.mark.parametrize("pipelined", [False, True], ids=["synchronous", "pipelined"])
def test_a_broker_frozen_for_10s_loses_nothing(
    kafka: KafkaCluster, make_config: MakeConfig, tmp_path: Path, pipelined: bool
) -> None:
    pid = getattr(kafka, "pid", None)
    if pid is None:
        pytest.skip("the broker is not a child process of the tests (KMQ_BOOTSTRAP_SERVERS): it cannot be frozen")
    config = make_config(partitions=4, msg_timeout_ms=2_000, max_redeliveries=100, pipelined=pipelined)
    with running_flow(kafka, config, tmp_path) as flow:
        sender = Sender(config, SENT_BEFORE).start()
        progress = accounted(flow)
        wait_for(lambda: progress() >= FREEZE_AFTER, timeout_s=60, what="the first messages processed")
        before = progress()
        os.kill(pid, signal.SIGSTOP)
        try:
            late = Sender(config, MESSAGES - SENT_BEFORE, first=SENT_BEFORE + 1).start()
            time.sleep(FREEZE_S)  # the fault itself: the broker answers nothing for this long
        finally:
            os.kill(pid, signal.SIGCONT)
        resumed_ms = time.time_ns() // 1_000_000
        recovery_s = (first_result_after(config, flow.results, resumed_ms) - resumed_ms) / 1000
        verdict = wait_accounted(flow, sender, late, timeout_s=120.0)
    print(
        f"\nbroker frozen {FREEZE_S:.0f} s with about {before} of {MESSAGES} processed: the first result written "
        f"after SIGCONT is stamped {recovery_s:.1f} s after it; processed {verdict.processed}, "
        f"duplicates {verdict.duplicates}, "
        f"redelivered {verdict.redelivered}, lost {verdict.lost}"
    )
    assert verdict.sent == MESSAGES
    assert verdict.lost == 0, f"lost {verdict.lost}, e.g. {verdict.lost_sample}"
