"""`marker_format` wherever it is chosen: the config and its variable, `kmq demo`, `kmq bench`, `kmq api`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kmq.bench.options import CONSUMERS, CONTENDERS, KMQ_BATCH, BenchOptions
from kmq.config import KmqConfig
from kmq.demo import DemoOptions
from kmq.errors import ConfigError


def test_batch_is_the_default_and_kmq_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    config = KmqConfig(bootstrap_servers="b:1", queue_topic="q")
    assert (config.marker_format, config.end_flush_ms) == ("batch", 100)
    monkeypatch.setenv("KMQ_MARKER_FORMAT", "kmq")
    monkeypatch.setenv("KMQ_END_FLUSH_MS", "250")
    from_env = KmqConfig.from_env(bootstrap_servers="b:1", queue_topic="q")
    assert (from_env.marker_format, from_env.end_flush_ms) == ("kmq", 250)
    assert KmqConfig.from_env(**from_env.model_dump()).to_env()["KMQ_MARKER_FORMAT"] == "kmq"


def test_an_unknown_format_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMQ_MARKER_FORMAT", "avro")
    with pytest.raises(ConfigError, match="KMQ_MARKER_FORMAT"):
        KmqConfig.from_env(bootstrap_servers="b:1", queue_topic="q")


def test_demo_and_bench_refuse_an_unknown_format() -> None:
    with pytest.raises(ConfigError, match="marker_format"):
        DemoOptions(marker_format="avro")
    with pytest.raises(ConfigError, match="marker_format"):
        BenchOptions(marker_format="avro")


def test_kmq_batch_is_a_consumer_contender_measured_by_default() -> None:
    assert KMQ_BATCH in CONTENDERS and KMQ_BATCH in CONSUMERS
    assert KMQ_BATCH in BenchOptions().contenders


def test_kmq_api_refuses_an_unknown_format_in_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}
    env.update(
        {
            "KMQ_BOOTSTRAP_SERVERS": "localhost:9",
            "KMQ_API_QUEUES": "orders",
            "KMQ_API_KEYS": "k",
            "KMQ_API_RECEIPT_SECRET": "s" * 32,
        }
    )
    result = subprocess.run(
        [sys.executable, "-m", "kmq_api", "--marker-format", "avro"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "marker_format" in result.stderr
    assert "Traceback" not in result.stderr
