"""The SASL_SSL cluster shared by the security tests (tests/integration/test_security.py and the Spark one): users,
ACLs and a queue whose app user reads its password from a file, as a mounted Kubernetes Secret gives it."""

from __future__ import annotations

import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

from kmq.config import KmqConfig
from kmq.embedded import EmbeddedKafka

ADMIN_PASSWORD = "admin-secret-7f3e"
APP_PASSWORD = "app-secret-9c1d"
ALL_TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)


def start_secure_kafka() -> EmbeddedKafka:
    """A one-node Apache Kafka with a SASL_SSL listener and the users `admin` and `app`."""
    kafka = EmbeddedKafka("kafka", secure=True).start()
    try:
        kafka.create_user("admin", ADMIN_PASSWORD)
        kafka.create_user("app", APP_PASSWORD)
    except BaseException:
        kafka.stop()
        raise
    return kafka


def grant(kafka: EmbeddedKafka, user: str, resource: ResourceType, name: str, *operations: AclOperation) -> None:
    """ACLs on every topic or group whose name starts with `name`, made on the broker's own listener."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    bindings = [
        AclBinding(resource, name, ResourcePatternType.PREFIXED, f"User:{user}", "*", op, AclPermissionType.ALLOW)
        for op in operations
    ]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(timeout=30)


def grant_queue(kafka: EmbeddedKafka, user: str, config: KmqConfig) -> None:
    """`user` may read and write the queue's topics (every one is named after the queue) and use its groups."""
    grant(kafka, user, ResourceType.TOPIC, config.queue_topic, *ALL_TOPIC_OPERATIONS)
    grant(kafka, user, ResourceType.GROUP, config.queue_topic, AclOperation.READ, AclOperation.DESCRIBE)


def new_queue(kafka: EmbeddedKafka, tmp_path: Path) -> tuple[KmqConfig, KmqConfig]:
    """A queue made by the admin user, and the app user's config for it (its password from a file), with no ACL
    granted yet."""
    queue = f"t-secure-{uuid.uuid4().hex[:8]}"
    kafka.ensure_topics(kafka.secure_config(queue, "admin", ADMIN_PASSWORD), 2)
    password_file = tmp_path / "sasl-password"
    password_file.write_text(APP_PASSWORD + "\n")
    app = kafka.secure_config(queue, "app", "", sasl_password_file=str(password_file), msg_timeout_ms=2000)
    return kafka.secure_config(queue, "admin", ADMIN_PASSWORD), app
