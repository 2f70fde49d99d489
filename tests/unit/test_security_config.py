"""Connection security in one place: KmqConfig's SASL/TLS fields reach every client's librdkafka settings, the
password may come from a file (a mounted Secret), and it never shows in a repr, an error or the environment dump of a
file-based config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from kmq.config import KmqConfig
from kmq.errors import ConfigError
from kmq.kafka import admin_settings, consumer_settings, delivery_detail, producer_settings, security_error

SECURE = {
    "bootstrap_servers": "kafka:9093",
    "queue_topic": "orders",
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "SCRAM-SHA-512",
    "sasl_username": "app",
    "ssl_ca_location": "/etc/kmq/ca.pem",
}


def test_every_kind_of_client_gets_the_security_settings(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-the-file\n")
    config = KmqConfig(**SECURE, sasl_password_file=str(secret))
    expected = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "app",
        "sasl.password": "from-the-file",
        "ssl.ca.location": "/etc/kmq/ca.pem",
    }
    for settings in (admin_settings(config), producer_settings(config), consumer_settings(config, "g")):
        assert expected.items() <= settings.items()


def test_a_rotated_password_file_reaches_the_next_client(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("first")
    config = KmqConfig(**SECURE, sasl_password_file=str(secret))
    secret.write_text("rotated")
    assert config.kafka_settings()["sasl.password"] == "rotated"


def test_the_password_file_is_read_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "password"
    secret.write_text("env-file-secret")
    monkeypatch.setenv("KMQ_BOOTSTRAP_SERVERS", "kafka:9093")
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", "orders")
    monkeypatch.setenv("KMQ_SASL_PASSWORD_FILE", str(secret))
    config = KmqConfig.from_env()
    assert config.kafka_settings()["sasl.password"] == "env-file-secret"
    assert "env-file-secret" not in repr(config) and "env-file-secret" not in str(config.to_env())


def test_a_missing_password_file_stops_the_first_client_naming_the_setting() -> None:
    config = KmqConfig(**SECURE, sasl_password_file="/run/secrets/nope")  # checkable where nothing is mounted
    with pytest.raises(ConfigError, match=r"sasl_password_file: cannot read /run/secrets/nope: No such file"):
        admin_settings(config)


def test_a_password_and_a_password_file_together_are_refused(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("x")
    with pytest.raises(ConfigError, match="both set: keep one") as raised:
        KmqConfig(**SECURE, sasl_password="inline-secret", sasl_password_file=str(secret))
    assert "inline-secret" not in str(raised.value)


def test_the_password_cannot_hide_in_the_pass_through() -> None:
    with pytest.raises(ConfigError, match=r"must not hold sasl\.password: set sasl_password or sasl_password_file"):
        KmqConfig(**SECURE, kafka_config={"sasl.password": "leaky"})


def test_an_inline_password_stays_out_of_reprs() -> None:
    config = KmqConfig(**SECURE, sasl_password="inline-secret")
    assert "inline-secret" not in repr(config) and "inline-secret" not in str(config.model_dump())


def test_security_errors_say_what_to_fix_without_the_password() -> None:
    config = KmqConfig(**SECURE, sasl_password="inline-secret")
    auth = security_error(config, KafkaError(KafkaError._AUTHENTICATION, "kafka:9093/1: SASL authentication error"))
    assert "SASL authentication of user 'app' (SCRAM-SHA-512) failed" in str(auth)
    assert "KMQ_SASL_PASSWORD_FILE" in str(auth) and "inline-secret" not in str(auth)
    tls = security_error(config, KafkaError(KafkaError._SSL, "kafka:9093/1: certificate verify failed"))
    assert "TLS failed: certificate verify failed" in str(tls) and "ssl_ca_location=/etc/kmq/ca.pem" in str(tls)


def test_an_acl_refusal_names_the_topic_and_the_permission() -> None:
    detail = delivery_detail(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), "orders__markers")
    assert "lacks the Write permission on topic 'orders__markers' (TOPIC_AUTHORIZATION_FAILED)" in detail
    assert "--operation Write --topic orders__markers" in detail


CLIENT_CONSTRUCTOR = re.compile(r"(?<![\w.])(Producer|Consumer|AdminClient|ShareConsumer)\(")
ROOT = Path(__file__).resolve().parents[2]


def test_every_module_that_makes_a_kafka_client_builds_its_settings_from_the_config() -> None:
    """A client made from hand-written settings would miss the security fields (kmq/embedded talks to its own
    loopback broker, and the settings helpers themselves are the source)."""
    makers = [
        path
        for package in ("kmq", "tracker", "api")
        for path in (ROOT / package).rglob("*.py")
        if "embedded" not in path.parts and CLIENT_CONSTRUCTOR.search(path.read_text())
    ]
    assert len(makers) > 10, makers
    sources = ("_settings(", "kafka_settings()")
    bare = [str(p.relative_to(ROOT)) for p in makers if not any(s in p.read_text() for s in sources)]
    assert bare == [], f"Kafka clients made without the config's settings: {bare}"
