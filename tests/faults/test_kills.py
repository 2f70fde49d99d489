"""Workers and tracker replicas SIGKILLed again and again while messages flow: nothing is lost, and the duplicates
are counted and bounded (issue 15, fault tests).

The issue's manual run sent 20 000 messages through 68 kills; here 16 000 messages and a kill every 1.5 s while they
flow (at most 24 s) keep the test within about a minute on 2 shared cores (tansu makes a group rejoin take a second).
The messages are sent in waves over the kills' window, so that they are still flowing through every kill however
fast the workers are (sent at once, they were all processed within 10 s once receiving stopped waiting for full
batches, before enough kills).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kmq.config import KmqConfig
from kmq.demo.sending import Sender
from kmq.demo.worker import BATCH_SIZE
from kmq.embedded import KafkaCluster
from tests.faults.flow import running_flow, wait_accounted

pytestmark = [pytest.mark.faults, pytest.mark.integration]
MakeConfig = Callable[..., KmqConfig]
MESSAGES = 16_000
WAVES = 8  # MESSAGES sent in this many waves, one every SEND_EVERY_S
KILL_EVERY_S = 1.5
KILLING_FOR_S = 24.0
SEND_EVERY_S = KILLING_FOR_S / WAVES
MIN_KILLS = 6
TRACKER_IN_FLIGHT = 500  # the tracker's default max_in_flight: what one killed replica may have copied unENDed


@pytest.mark.parametrize("pipelined", [False, True], ids=["synchronous", "pipelined"])
def test_sigkills_of_workers_and_trackers_lose_nothing(
    kafka: KafkaCluster, make_config: MakeConfig, tmp_path: Path, pipelined: bool
) -> None:
    config = make_config(partitions=4, msg_timeout_ms=2_000, max_redeliveries=100, pipelined=pipelined)
    chance = random.Random(15)
    killed: list[str] = []
    wave = MESSAGES // WAVES
    senders = [Sender(config, wave, first=1 + i * wave) for i in range(WAVES)]
    with running_flow(kafka, config, tmp_path) as flow:
        started = time.monotonic()
        next_kill = started + KILL_EVERY_S
        sent_waves = 0

        def send_and_kill_on_schedule() -> None:
            nonlocal next_kill, sent_waves
            elapsed = time.monotonic() - started
            while sent_waves < WAVES and sent_waves * SEND_EVERY_S <= elapsed:  # wave i goes at i * SEND_EVERY_S
                senders[sent_waves].start()
                sent_waves += 1
            if time.monotonic() >= next_kill and elapsed < KILLING_FOR_S:
                killed.append(flow.kill_one(chance))
                next_kill = time.monotonic() + KILL_EVERY_S

        send_and_kill_on_schedule()
        verdict = wait_accounted(flow, *senders, timeout_s=150.0, on_poll=send_and_kill_on_schedule)
    elapsed_s = time.monotonic() - started
    print(
        f"\n{MESSAGES} messages, {len(killed)} SIGKILLs ({', '.join(killed)}) in {elapsed_s:.0f} s: "
        f"processed {verdict.processed}, duplicates {verdict.duplicates}, redelivered {verdict.redelivered}, "
        f"dead-lettered {verdict.dead_lettered}, lost {verdict.lost}"
    )
    assert verdict.sent == MESSAGES
    assert verdict.lost == 0, f"lost {verdict.lost}, e.g. {verdict.lost_sample}"
    assert len(killed) >= MIN_KILLS, "the messages were through before the kills: send more"
    # Each kill can repeat at most what the killed process had in hand: a worker's batch, a tracker's copies.
    assert verdict.duplicates <= len(killed) * (BATCH_SIZE + TRACKER_IN_FLIGHT)
