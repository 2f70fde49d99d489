"""The soak (scripts/soak, tests/soak/soak.py) for 3 minutes on the session's broker: a steady load at half the
measured maximum through workers, tracker and facade replicas and an HTTP client, one of them SIGKILLed every minute;
nothing lost, no stall over 30 s, no long-lived process's RSS growing over 20 % (here: from minute 1 to the end)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmq.embedded import KafkaCluster
from tests.soak.soak import run

pytestmark = [pytest.mark.faults, pytest.mark.integration, pytest.mark.timeout(900)]
MINUTES = 3


def test_a_three_minute_soak_loses_nothing_never_stalls_and_does_not_grow(kafka: KafkaCluster, tmp_path: Path) -> None:
    outcome = run(MINUTES, tmp_path, cluster=kafka)
    assert outcome.sent > 0 and outcome.max_rate > 0
    assert outcome.ok, f"{'; '.join(outcome.failures)} (logs in {tmp_path})"
