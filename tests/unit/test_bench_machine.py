"""What a bench run notes about the code and the machine it measured on."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmq.bench.machine import at_start, broker_version, machine
from kmq.bench.options import BenchOptions
from kmq.embedded import KAFKA_VERSION

ROOT = Path(__file__).resolve().parents[2]


def test_a_run_notes_its_commit_and_the_load_at_both_ends() -> None:
    started = at_start()
    if (ROOT / ".git").exists():  # a checkout (a worktree's .git is a file)
        assert len(started["git_commit"]) == 40 and isinstance(started["git_dirty"], bool)
    else:  # an unpacked source tree: no commit to name, and no guess
        assert (started["git_commit"], started["git_dirty"]) == (None, None)
    noted = machine("embedded kafka", "Apache Kafka 4.4.0", started)
    assert noted["git_commit"] == started["git_commit"] and noted["broker_version"] == "Apache Kafka 4.4.0"
    assert len(noted["load_average_start"]) == len(noted["load_average_end"]) == 3
    assert noted["cores"] and noted["python"] and noted["librdkafka"] and noted["confluent_kafka"]


def test_the_broker_version_is_known_for_the_embedded_kafka_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KMQ_KAFKA_VERSION", raising=False)
    assert broker_version(BenchOptions()) == f"Apache Kafka {KAFKA_VERSION}"
    monkeypatch.setenv("KMQ_KAFKA_VERSION", "3.9.2")
    assert broker_version(BenchOptions()) == "Apache Kafka 3.9.2"
    assert broker_version(BenchOptions(bootstrap_servers="k1:9092")) is None
    assert broker_version(BenchOptions(backend="tansu")) is None
