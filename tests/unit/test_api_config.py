"""ApiConfig: validation, and reading it from KMQ_* variables at the entry point."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from kmq.config import KmqConfig
from kmq.errors import ConfigError
from kmq_api.config import ApiConfig

SECRET = "k" * 32


def _queue(name: str = "orders") -> KmqConfig:
    return KmqConfig(bootstrap_servers="localhost:9092", queue_topic=name)


def test_a_valid_config_serves_its_queues() -> None:
    config = ApiConfig(queues=(_queue("a"), _queue("b")), receipt_secret=SECRET, api_keys=(SecretStr("key"),))
    assert config.queue("b") == _queue("b")
    assert config.queue("c") is None
    assert (config.host, config.port) == ("0.0.0.0", 8080)


def test_no_api_key_is_refused_unless_anonymous_is_explicit() -> None:
    with pytest.raises(ConfigError, match="KMQ_API_KEYS"):
        ApiConfig(queues=(_queue(),), receipt_secret=SECRET)
    assert ApiConfig(queues=(_queue(),), receipt_secret=SECRET, allow_anonymous=True).allow_anonymous


def test_keys_and_anonymous_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="contradict"):
        ApiConfig(queues=(_queue(),), receipt_secret=SECRET, api_keys=(SecretStr("k"),), allow_anonymous=True)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"receipt_secret": "short"}, "receipt_secret"),
        ({"queues": ()}, "queues"),
        ({"queues": (_queue(), _queue())}, "queues"),
        ({"api_keys": (SecretStr(" "),)}, "api_keys"),
        ({"max_body_bytes": 0}, "max_body_bytes"),
        ({"port": 70_000}, "port"),
    ],
)
def test_bad_values_name_their_field(changes: dict[str, object], field: str) -> None:
    fields: dict[str, object] = {"queues": (_queue(),), "receipt_secret": SECRET, "allow_anonymous": True}
    with pytest.raises(ConfigError) as raised:
        ApiConfig(**{**fields, **changes})
    assert raised.value.field == field


def test_it_is_frozen() -> None:
    config = ApiConfig(queues=(_queue(),), receipt_secret=SECRET, allow_anonymous=True)
    with pytest.raises(ValueError, match="frozen"):
        config.port = 1


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("KMQ_QUEUE_TOPIC", "KMQ_MARKERS_TOPIC", "KMQ_GROUP_ID", "KMQ_DEAD_LETTER_TOPIC", "KMQ_API_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KMQ_BOOTSTRAP_SERVERS", "broker:9092")
    monkeypatch.setenv("KMQ_API_RECEIPT_SECRET", SECRET)
    monkeypatch.setenv("KMQ_API_KEYS", "one, two")
    return monkeypatch


def test_from_env_reads_queues_keys_and_limits(env: pytest.MonkeyPatch) -> None:
    env.setenv("KMQ_API_QUEUES", "orders,payments")
    env.setenv("KMQ_API_PORT", "9000")
    env.setenv("KMQ_API_MAX_MESSAGE_BYTES", "1000")
    env.setenv("KMQ_MSG_TIMEOUT_MS", "5000")
    env.setenv("KMQ_API_WRITE_TIMEOUT_MS", "2500")
    env.setenv("KMQ_API_RECEIVER_IDLE_MS", "60000")
    config = ApiConfig.from_env()
    assert (config.write_timeout_ms, config.receiver_idle_ms) == (2500, 60_000)
    assert [q.queue_topic for q in config.queues] == ["orders", "payments"]
    assert config.queues[1].markers_topic == "payments__markers"
    assert config.queues[1].group_id == "payments__workers"
    assert config.queues[0].msg_timeout_ms == 5000
    assert config.queues[0].bootstrap_servers == "broker:9092"
    assert [k.get_secret_value() for k in config.api_keys] == ["one", "two"]
    assert (config.port, config.max_message_bytes) == (9000, 1000)


def test_from_env_falls_back_to_the_queue_topic_and_keeps_its_names(env: pytest.MonkeyPatch) -> None:
    env.setenv("KMQ_QUEUE_TOPIC", "jobs")
    env.setenv("KMQ_MARKERS_TOPIC", "jobs-m")
    config = ApiConfig.from_env()
    assert config.queues[0].markers_topic == "jobs-m"


def test_from_env_refuses_one_markers_topic_for_several_queues(env: pytest.MonkeyPatch) -> None:
    env.setenv("KMQ_API_QUEUES", "a,b")
    env.setenv("KMQ_MARKERS_TOPIC", "m")
    with pytest.raises(ConfigError, match="KMQ_MARKERS_TOPIC"):
        ApiConfig.from_env()


@pytest.mark.parametrize(
    ("unset", "named"),
    [("KMQ_API_RECEIPT_SECRET", "KMQ_API_RECEIPT_SECRET"), ("KMQ_API_QUEUES", "KMQ_API_QUEUES")],
)
def test_from_env_names_a_missing_setting(env: pytest.MonkeyPatch, unset: str, named: str) -> None:
    env.setenv("KMQ_API_QUEUES", "orders")
    env.delenv(unset)
    with pytest.raises(ConfigError, match=named):
        ApiConfig.from_env()


def test_from_env_names_a_malformed_number(env: pytest.MonkeyPatch) -> None:
    env.setenv("KMQ_API_QUEUES", "orders")
    env.setenv("KMQ_API_PORT", "eighty")
    with pytest.raises(ConfigError, match="KMQ_API_PORT"):
        ApiConfig.from_env()


def test_admin_keys_alone_are_keys_and_come_from_their_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    config = ApiConfig(queues=(_queue(),), receipt_secret=SECRET, admin_keys=(SecretStr("boss"),))
    assert [key.get_secret_value() for key in config.all_keys] == ["boss"]
    for name, value in {"KMQ_API_QUEUES": "orders", "KMQ_API_KEYS": "a,b", "KMQ_API_ADMIN_KEYS": "c"}.items():
        monkeypatch.setenv(name, value)
    read = ApiConfig.from_env({"bootstrap_servers": "localhost:9092"}, receipt_secret=SECRET)
    assert [key.get_secret_value() for key in read.admin_keys] == ["c"]
    assert [key.get_secret_value() for key in read.all_keys] == ["a", "b", "c"]
