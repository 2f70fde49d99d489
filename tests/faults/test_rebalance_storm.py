"""A rebalance storm: demo workers (pipelined STARTs, the default) join and leave the group every 2 s for a minute
while messages flow. Each revocation waits for the STARTs in flight and commits what they allow (PROTOCOL.md,
"Revocation and close"): nothing is lost, and nothing is redelivered by the tracker, since every message handed over
is processed and ENDed after its START (issue 24)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kmq.config import KmqConfig
from kmq.demo.sending import Sender
from kmq.demo.worker import BATCH_SIZE
from kmq.embedded import KafkaCluster
from tests.faults.flow import STOP_TIMEOUT_S, running_flow, wait_accounted

pytestmark = [pytest.mark.faults, pytest.mark.integration]
MakeConfig = Callable[..., KmqConfig]
CHANGE_EVERY_S = 2.0
STORM_S = 60.0
PER_CHANGE = 150  # messages sent at each membership change: they flow through the whole storm
MIN_CHANGES = 20


def test_a_rebalance_storm_loses_nothing_and_redelivers_nothing(
    kafka: KafkaCluster, make_config: MakeConfig, tmp_path: Path
) -> None:
    # Long enough that only a message left without its END would be redelivered: no worker is killed here.
    config = make_config(partitions=4, msg_timeout_ms=60_000, pipelined=True)
    senders: list[Sender] = []
    changes: list[str] = []
    with running_flow(kafka, config, tmp_path, trackers=1, workers=2, drop_rate=0.0) as flow:
        started = time.monotonic()
        while time.monotonic() - started < STORM_S:
            senders.append(Sender(config, PER_CHANGE, first=len(senders) * PER_CHANGE + 1).start())
            if len(changes) % 2 == 0:
                flow.start_worker()
                changes.append("join")
            else:  # the oldest leaves politely (close: STARTs settled, offsets committed, group left)
                leaving = flow.workers.pop(0)
                flow.children.stop([leaving], STOP_TIMEOUT_S)
                changes.append("leave")
            flow.children.check()
            time.sleep(max(0.0, CHANGE_EVERY_S - (time.monotonic() - started) % CHANGE_EVERY_S))
        verdict = wait_accounted(flow, *senders, timeout_s=120.0)
    print(
        f"\n{verdict.sent} messages, {len(changes)} membership changes in {STORM_S:.0f} s: processed "
        f"{verdict.processed}, duplicates {verdict.duplicates}, redelivered {verdict.redelivered}, lost {verdict.lost}"
    )
    assert verdict.sent == len(senders) * PER_CHANGE
    assert len(changes) >= MIN_CHANGES
    assert verdict.lost == 0, f"lost {verdict.lost}, e.g. {verdict.lost_sample}"
    assert verdict.redelivered == 0, "a message handed over was left without its END"
    # A change re-reads at most what was handed over and not yet committed: a batch per worker.
    assert verdict.duplicates <= len(changes) * 2 * BATCH_SIZE
