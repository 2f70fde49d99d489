"""The broker frozen (SIGSTOP) for 10 s while messages flow, then resumed: nothing is lost; the time until messages
are processed again is printed (issue 15, fault tests)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kmq.config import KmqConfig
from kmq.demo.sending import Sender
from kmq.embedded import KafkaCluster
from tests.faults.flow import accounted, running_flow, wait_accounted
from tests.helpers import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.integration]
MakeConfig = Callable[..., KmqConfig]
MESSAGES = 3_000
FREEZE_S = 10.0


def test_a_broker_frozen_for_10s_loses_nothing(kafka: KafkaCluster, make_config: MakeConfig, tmp_path: Path) -> None:
    pid = getattr(kafka, "pid", None)
    if pid is None:
        pytest.skip("the broker is not a child process of the tests (KMQ_BOOTSTRAP_SERVERS): it cannot be frozen")
    config = make_config(partitions=4, msg_timeout_ms=2_000, max_redeliveries=100)
    with running_flow(kafka, config, tmp_path) as flow:
        sender = Sender(config, MESSAGES).start()
        progress = accounted(flow)
        wait_for(lambda: progress() >= MESSAGES // 5, timeout_s=60, what="a fifth of the messages processed")
        before = progress()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(FREEZE_S)  # the fault itself: the broker answers nothing for this long
        finally:
            os.kill(pid, signal.SIGCONT)
        resumed = time.monotonic()
        wait_for(lambda: progress() > before, timeout_s=90, what="processing to resume after the freeze")
        recovery_s = time.monotonic() - resumed
        verdict = wait_accounted(flow, sender, timeout_s=120.0)
    print(
        f"\nbroker frozen {FREEZE_S:.0f} s with {before} of {MESSAGES} processed: processing resumed "
        f"{recovery_s:.1f} s after SIGCONT; processed {verdict.processed}, duplicates {verdict.duplicates}, "
        f"redelivered {verdict.redelivered}, lost {verdict.lost}"
    )
    assert verdict.sent == MESSAGES
    assert verdict.lost == 0, f"lost {verdict.lost}, e.g. {verdict.lost_sample}"
