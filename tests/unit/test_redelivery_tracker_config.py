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


class _WithMarkerFormat(KmqConfig):
    """A config that has a marker format (the batch format's field), to check the rule against it."""

    marker_format: str = "kmq"


def test_batch_markers_are_refused_with_a_jvm_tracker() -> None:
    with pytest.raises(ConfigError, match="BATCH START as an END"):
        _WithMarkerFormat(
            bootstrap_servers="b:9092", queue_topic="jobs", redelivery_tracker="jvm", marker_format="batch"
        )
    ok = _WithMarkerFormat(
        bootstrap_servers="b:9092", queue_topic="jobs", redelivery_tracker="kmq", marker_format="batch"
    )
    assert ok.marker_format == "batch"
