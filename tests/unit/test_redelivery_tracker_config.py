"""`redelivery_tracker`: which tracker the user declares, and the configurations a JVM kmq tracker cannot serve."""

from __future__ import annotations

import pytest

from kmq.config import KmqConfig
from kmq.errors import ConfigError


def test_this_projects_tracker_is_the_default() -> None:
    assert KmqConfig(bootstrap_servers="b:9092", queue_topic="jobs").redelivery_tracker == "kmq"


def test_the_jvm_tracker_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMQ_REDELIVERY_TRACKER", "jvm")
    config = KmqConfig.from_env(bootstrap_servers="b:9092", queue_topic="jobs")
    assert config.redelivery_tracker == "jvm"
    assert config.to_env()["KMQ_REDELIVERY_TRACKER"] == "jvm"


def test_an_unknown_tracker_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="redelivery_tracker"):
        KmqConfig(bootstrap_servers="b:9092", queue_topic="jobs", redelivery_tracker="scala")


def test_batch_markers_are_refused_with_a_jvm_tracker() -> None:
    with pytest.raises(ConfigError, match="BATCH START as an END"):
        KmqConfig(bootstrap_servers="b:9092", queue_topic="jobs", redelivery_tracker="jvm", marker_format="batch")
    ok = KmqConfig(bootstrap_servers="b:9092", queue_topic="jobs", redelivery_tracker="kmq", marker_format="batch")
    assert ok.marker_format == "batch"


def test_declaring_a_jvm_tracker_picks_kmq_markers_over_the_batch_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert KmqConfig(bootstrap_servers="b:9092", queue_topic="jobs").marker_format == "batch"
    jvm = KmqConfig(bootstrap_servers="b:9092", queue_topic="jobs", redelivery_tracker="jvm")
    assert jvm.marker_format == "kmq"
    monkeypatch.setenv("KMQ_REDELIVERY_TRACKER", "jvm")
    assert KmqConfig.from_env(bootstrap_servers="b:9092", queue_topic="jobs").marker_format == "kmq"
