"""kmq over SASL_SSL (SCRAM-SHA-512, TLS from a throwaway CA, ACLs enforced by StandardAuthorizer) on an embedded
Apache Kafka: the whole flow works with a password read from a file; a wrong password, an untrusted certificate and
a missing ACL each fail at once with an error that says what to fix, and the password shows up nowhere."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from fastapi.testclient import TestClient
from prometheus_client import generate_latest
from pydantic import SecretStr

from kmq.client import KmqClient
from kmq.embedded import EmbeddedKafka
from kmq.embedded._jvm import java_binary
from kmq.embedded._tls import make_ca
from kmq.errors import KafkaSecurityError, MarkerWriteError
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.spark.positions import QueuePositions
from kmq_api.app import create_app
from kmq_api.config import ApiConfig
from kmq_tracker import TrackerConfig, TrackerService
from tests.helpers import wait_for
from tests.secure_kafka import APP_PASSWORD, grant, grant_queue, new_queue

AUTH = {"Authorization": "Bearer security-key"}


def test_the_whole_flow_runs_over_sasl_ssl_and_the_password_shows_nowhere(
    secure_kafka: EmbeddedKafka, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    _, config = new_queue(secure_kafka, tmp_path)
    grant_queue(secure_kafka, "app", config)
    expected = {f"m{i}".encode() for i in range(30)}
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(value) for value in sorted(expected))
    tracker = TrackerService(TrackerConfig(kmq=config, http_port=0, commit_interval_ms=200)).run_in_thread()
    processed: set[bytes] = set()
    try:
        assert tracker.wait_ready(60), "tracker not ready"
        with KmqClient(config) as client:
            first = True

            def receive() -> bool:
                # the first batch is left unacknowledged: the tracker must redeliver it over SASL_SSL too (the first
                # non-empty one: a receive that returns before the group join completes brings nothing)
                nonlocal first
                batch = client.receive(max_messages=10, timeout_s=0.5)
                for msg in batch:
                    if not first:
                        client.processed(msg)
                        processed.add(msg.value or b"")
                first = first and not batch
                return processed >= expected

            wait_for(receive, 60, interval_s=0, what="every message processed, redelivered ones included")
        assert tracker.metrics.redeliveries._value.get() >= 1  # type: ignore[attr-defined]  # prometheus internals
        metrics = generate_latest(tracker.metrics.registry).decode()
    finally:
        tracker.stop()
    key, secret = SecretStr("security-key"), "security-test-secret-0123456789ab"
    api = ApiConfig(queues=(config,), receipt_secret=secret, api_keys=(key,))
    with TestClient(create_app(api), headers=AUTH) as http:
        path = f"/v1/queues/{config.queue_topic}"
        sent = http.post(f"{path}/messages", json={"messages": [{"value": "over-http"}]})
        assert sent.status_code == 200, sent.text
        seen: list[str] = []

        def receive_http() -> bool:
            answer = http.post(f"{path}/receive", json={"max_messages": 10, "wait_ms": 500}).json()["messages"]
            if answer:
                acked = http.post(f"{path}/ack", json={"receipts": [m["receipt"] for m in answer]})
                assert acked.status_code == 200, acked.text
            seen.extend(m["value"] for m in answer)
            return "over-http" in seen

        wait_for(receive_http, 60, interval_s=0, what="the HTTP message received and acknowledged")
        api_metrics = http.get("/metrics")
        assert api_metrics.status_code == 200, api_metrics.text
    for shown in (caplog.text, metrics, api_metrics.text, repr(config), str(config.kafka_settings().keys())):
        assert APP_PASSWORD not in shown
    assert config.kafka_settings()["sasl.password"] == APP_PASSWORD  # read from the file by every client


def test_a_wrong_password_fails_at_once_with_what_to_check(secure_kafka: EmbeddedKafka, tmp_path: Path) -> None:
    admin, _ = new_queue(secure_kafka, tmp_path)
    # a timeout this long would be a hang; the error must come from the refusal, not from the clock
    wrong = admin.with_overrides(sasl_password="not-the-password", metadata_timeout_ms=120_000)
    with pytest.raises(KafkaSecurityError) as raised:
        KmqClient(wrong)
    message = str(raised.value)
    assert "SASL authentication of user 'admin' (SCRAM-SHA-512) failed" in message, message
    assert "KMQ_SASL_PASSWORD" in message and "not-the-password" not in message


def test_an_untrusted_certificate_fails_at_once_naming_the_ca(secure_kafka: EmbeddedKafka, tmp_path: Path) -> None:
    admin, _ = new_queue(secure_kafka, tmp_path)
    other_ca = make_ca(java_binary(), tmp_path, "some-other-ca")
    untrusting = admin.with_overrides(ssl_ca_location=str(other_ca), metadata_timeout_ms=120_000)
    with pytest.raises(KafkaSecurityError) as raised:
        TrackerService(TrackerConfig(kmq=untrusting, http_port=0)).run_in_thread()
    message = str(raised.value)
    assert "TLS failed" in message and "certificate verify failed" in message, message
    assert f"ssl_ca_location={other_ca}" in message


def test_a_principal_that_cannot_write_markers_is_told_which_topic_and_permission(
    secure_kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    _, config = new_queue(secure_kafka, tmp_path)
    # it may see all three topics, read and write the queue and use its group, but not write markers
    grant(secure_kafka, "app", ResourceType.TOPIC, config.queue_topic, AclOperation.DESCRIBE)
    for operation in (AclOperation.READ, AclOperation.WRITE):
        grant_exact(secure_kafka, "app", config.queue_topic, operation)
    grant(secure_kafka, "app", ResourceType.GROUP, config.queue_topic, AclOperation.READ)
    with KmqProducer(config) as producer:
        producer.send_batch([OutgoingMessage(b"unmarked")])
    with KmqClient(config) as client, pytest.raises(MarkerWriteError) as raised:
        # (With pipelined STARTs the batch is handed over and its failed START raised one receive() later.)
        wait_for(lambda: client.receive(max_messages=1, timeout_s=0.5) and False, 60, interval_s=0, what="a receive")
    message = str(raised.value)
    assert f"lacks the Write permission on topic {config.markers_topic!r}" in message, message
    assert "TOPIC_AUTHORIZATION_FAILED" in message


def grant_exact(kafka: EmbeddedKafka, user: str, topic: str, operation: AclOperation) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    binding = AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*", operation, AclPermissionType.ALLOW
    )
    admin.create_acls([binding], request_timeout=30)[binding].result(timeout=30)


def test_the_spark_sources_driver_fails_at_once_on_a_wrong_password(
    secure_kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    # the driver checks the topics through its own consumer: a refused login must still end it at once
    admin, _ = new_queue(secure_kafka, tmp_path)
    wrong = admin.with_overrides(sasl_password="not-the-password", metadata_timeout_ms=120_000)
    with pytest.raises(KafkaSecurityError, match="SASL authentication of user 'admin'"):
        QueuePositions(wrong)
