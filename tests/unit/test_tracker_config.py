"""TrackerConfig: defaults, validation with named settings, and KMQ_* / KMQ_TRACKER_* environment variables."""

from __future__ import annotations

import pytest

from kmq.config import KmqConfig
from kmq.errors import ConfigError
from kmq_tracker.config import DEFAULT_HTTP_PORT, TrackerConfig

KMQ = KmqConfig(bootstrap_servers="broker:9092", queue_topic="jobs")


def test_defaults_derive_from_the_markers_topic() -> None:
    config = TrackerConfig(kmq=KMQ)
    assert config.group_id == "jobs__markers__tracker"
    assert config.http_port == DEFAULT_HTTP_PORT
    assert config.isolation_level == "read_uncommitted"


def test_transactional_mode_reads_committed_markers_only() -> None:
    config = TrackerConfig(kmq=KMQ.with_overrides(transactional=True))
    assert config.isolation_level == "read_committed"


def test_kmq_may_be_given_as_a_mapping() -> None:
    config = TrackerConfig(kmq={"bootstrap_servers": "b:1", "queue_topic": "q"}, group_id="")
    assert config.group_id == "q__markers__tracker"


def test_config_is_frozen() -> None:
    config = TrackerConfig(kmq=KMQ)
    with pytest.raises(ValueError, match="frozen"):
        config.http_port = 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"http_port": 70_000}, "http_port"),
        ({"redelivery_rate_per_s": 0}, "redelivery_rate_per_s"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"commit_interval_ms": 0}, "commit_interval_ms"),
        ({"retry_backoff_ms": 500, "retry_backoff_max_ms": 100}, "retry_backoff_max_ms"),
        ({"group_id": "jobs__workers"}, "group_id"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_settings_are_named(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        TrackerConfig(kmq=KMQ, **changes)
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")


def test_from_env_reads_core_and_tracker_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMQ_BOOTSTRAP_SERVERS", "env-broker:9092")
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", "orders")
    monkeypatch.setenv("KMQ_MAX_REDELIVERIES", "5")
    monkeypatch.setenv("KMQ_TRACKER_HTTP_PORT", "9999")
    monkeypatch.setenv("KMQ_TRACKER_GROUP_ID", "trackers")
    config = TrackerConfig.from_env()
    assert config.kmq.bootstrap_servers == "env-broker:9092"
    assert config.kmq.max_redeliveries == 5
    assert config.http_port == 9999
    assert config.group_id == "trackers"


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMQ_BOOTSTRAP_SERVERS", "env-broker:9092")
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", "orders")
    monkeypatch.setenv("KMQ_TRACKER_HTTP_PORT", "9999")
    config = TrackerConfig.from_env(kmq_overrides={"queue_topic": "flagged"}, http_port=1234)
    assert config.kmq.queue_topic == "flagged"
    assert config.http_port == 1234


def test_a_bad_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMQ_BOOTSTRAP_SERVERS", "b:1")
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", "q")
    monkeypatch.setenv("KMQ_TRACKER_MAX_IN_FLIGHT", "many")
    with pytest.raises(ConfigError, match="KMQ_TRACKER_MAX_IN_FLIGHT"):
        TrackerConfig.from_env()


def test_a_missing_core_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KMQ_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", "q")
    with pytest.raises(ConfigError, match="bootstrap_servers"):
        TrackerConfig.from_env()


def test_env_names_lists_the_tracker_variables() -> None:
    names = TrackerConfig.env_names()
    assert "KMQ_TRACKER_HTTP_PORT" in names
    assert "KMQ_TRACKER_REDELIVERY_RATE_PER_S" in names
    assert all(name.startswith("KMQ_TRACKER_") for name in names)


def test_to_env_round_trips_through_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    kmq = KMQ.with_overrides(
        transactional=True,
        sasl_password="s3cret",
        kafka_config={"fetch.wait.max.ms": 10},
        consumer_kafka_config={"session.timeout.ms": 2000, "check.crcs": True},
    )
    config = TrackerConfig(kmq=kmq, http_port=0, redelivery_rate_per_s=12.5, http_enabled=False, group_id="t")
    for name, value in config.to_env().items():
        monkeypatch.setenv(name, value)
    assert TrackerConfig.from_env() == config
