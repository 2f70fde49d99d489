"""SCRAM users of a `secure` embedded Kafka, made through the admin API on the node's own PLAINTEXT listener."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._scram import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from kmq.errors import EmbeddedBrokerError
from kmq.kafka import KAFKA_LOGGER

_ITERATIONS = 8192


def create_scram_user(bootstrap_servers: str, name: str, password: str, timeout_ms: int) -> None:
    """Create (or change the password of) SCRAM-SHA-512 user `name`."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "logger": KAFKA_LOGGER})  # type: ignore[dict-item]
    credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, _ITERATIONS)
    upsert = UserScramCredentialUpsertion(name, credential, password.encode())
    futures = admin.alter_user_scram_credentials([upsert], request_timeout=timeout_ms / 1000)
    try:
        futures[name].result(timeout=timeout_ms / 1000)
    except (KafkaException, TimeoutError) as e:
        raise EmbeddedBrokerError(f"could not create the SCRAM user {name!r}: {e}") from e
