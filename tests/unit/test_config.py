"""KmqConfig: defaults derived from the queue name, validation that names the field, the environment."""

from __future__ import annotations

import pytest

from kmq.config import KmqConfig
from kmq.errors import ConfigError
from kmq.settings import env_names


def test_names_derive_from_the_queue() -> None:
    config = KmqConfig(bootstrap_servers="k:9092", queue_topic="jobs")
    assert (config.markers_topic, config.dead_letter_topic, config.group_id) == (
        "jobs__markers",
        "jobs__undelivered",
        "jobs__workers",
    )
    assert (config.msg_timeout_ms, config.max_redeliveries, config.transactional) == (30_000, 3, False)


def test_explicit_names_win() -> None:
    config = KmqConfig(bootstrap_servers="k:9092", queue_topic="jobs", markers_topic="m", group_id="g")
    assert (config.markers_topic, config.group_id) == ("m", "g")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"msg_timeout_ms": 0}, "msg_timeout_ms"),
        ({"max_redeliveries": -1}, "max_redeliveries"),
        ({"queue_topic": "bad name"}, "queue_topic"),
        ({"bootstrap_servers": " "}, "bootstrap_servers"),
        ({"markers_topic": "jobs"}, "markers_topic"),
        ({"nack_backoff_base_ms": 10, "nack_backoff_max_ms": 5}, "nack_backoff_max_ms"),
        ({"kafka_config": {"group.id": "x"}}, "group.id"),
        ({"unknown_setting": 1}, "unknown_setting"),
    ],
)
def test_invalid_values_fail_naming_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        KmqConfig(**{"bootstrap_servers": "k:9092", "queue_topic": "jobs", **changes})


def test_config_is_frozen() -> None:
    config = KmqConfig(bootstrap_servers="k:9092", queue_topic="jobs")
    with pytest.raises(ValueError, match="frozen"):
        config.queue_topic = "other"  # type: ignore[misc]  # the point of the test


def test_kafka_settings_carry_security_and_pass_through() -> None:
    config = KmqConfig(
        bootstrap_servers="k:9093",
        queue_topic="jobs",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password="s3cret-pw",
        kafka_config={"linger.ms": 2},
    )
    assert config.kafka_settings() == {
        "bootstrap.servers": "k:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "s3cret-pw",
        "linger.ms": 2,
    }
    assert "s3cret-pw" not in repr(config)


def test_nack_backoff_doubles_and_caps() -> None:
    config = KmqConfig(bootstrap_servers="k", queue_topic="q", nack_backoff_base_ms=100, nack_backoff_max_ms=1000)
    assert [config.nack_delay_ms(n) for n in range(6)] == [100, 200, 400, 800, 1000, 1000]


def test_from_env_reads_kmq_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMQ_BOOTSTRAP_SERVERS", "a:1,b:2")
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", "orders")
    monkeypatch.setenv("KMQ_MSG_TIMEOUT_MS", "5000")
    monkeypatch.setenv("KMQ_TRANSACTIONAL", "true")
    monkeypatch.setenv("KMQ_KAFKA_CONFIG", '{"linger.ms": 7}')
    config = KmqConfig.from_env()
    assert (config.bootstrap_servers, config.queue_topic, config.msg_timeout_ms) == ("a:1,b:2", "orders", 5000)
    assert config.transactional and config.kafka_config == {"linger.ms": 7}


def test_starts_are_pipelined_unless_kmq_pipelined_is_false(monkeypatch: pytest.MonkeyPatch) -> None:
    assert KmqConfig(bootstrap_servers="k", queue_topic="q").pipelined
    monkeypatch.setenv("KMQ_BOOTSTRAP_SERVERS", "a:1")
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", "orders")
    monkeypatch.setenv("KMQ_PIPELINED", "false")
    assert not KmqConfig.from_env().pipelined


def test_from_env_names_the_bad_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMQ_BOOTSTRAP_SERVERS", "a:1")
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", "orders")
    monkeypatch.setenv("KMQ_MAX_REDELIVERIES", "many")
    with pytest.raises(ConfigError, match="KMQ_MAX_REDELIVERIES"):
        KmqConfig.from_env()


def test_from_env_names_a_missing_required_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KMQ_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", "orders")
    with pytest.raises(ConfigError, match="bootstrap_servers"):
        KmqConfig.from_env()


def test_every_field_has_a_kmq_variable() -> None:
    assert "KMQ_BOOTSTRAP_SERVERS" in env_names(KmqConfig)
    assert "KMQ_DEAD_LETTER_TOPIC" in env_names(KmqConfig)
