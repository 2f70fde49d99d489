"""Kafka metadata and topic creation for the clusters behind `KafkaCluster` (AdminClient, explicit partition counts)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._metadata import ClusterMetadata
from confluent_kafka.cimpl import NewTopic

from kmq.embedded._ports import HOST, accepts_connections, wait_until
from kmq.errors import BrokerUnavailableError, ConfigError
from kmq.kafka import KAFKA_LOGGER, is_unreachable

if TYPE_CHECKING:
    from kmq.embedded._child import ChildProcess

_log = logging.getLogger(__name__)
_METADATA_ATTEMPT_S = 1.0


def first_metadata(bootstrap_servers: str, deadline: float, alive: Callable[[], bool]) -> ClusterMetadata | None:
    """The cluster's metadata as soon as it answers; None if `alive()` turns false or the deadline passes first."""
    settings = {"bootstrap.servers": bootstrap_servers, "logger": KAFKA_LOGGER}
    admin = AdminClient(settings)  # type: ignore[arg-type]  # librdkafka takes a Logger
    while alive() and (remaining := deadline - time.monotonic()) > 0:
        try:
            return admin.list_topics(timeout=min(remaining, _METADATA_ATTEMPT_S))
        except KafkaException as e:
            _log.debug("no metadata from %s yet: %s", bootstrap_servers, e)
    return None


def check_partition_counts(topics: Mapping[str, int]) -> None:
    for name, partitions in topics.items():
        if partitions < 1:
            raise ConfigError(f"partitions of {name}", f"must be at least 1, not {partitions}")


def create_topics(
    settings: dict[str, Any], topics: Mapping[str, int], replication_factor: int, timeout_ms: int
) -> None:
    """Create the topics missing from the cluster (existing ones are kept), then wait until metadata shows them all."""
    check_partition_counts(topics)
    admin = AdminClient(settings)
    timeout_s = timeout_ms / 1000
    requested = [NewTopic(name, partitions, replication_factor) for name, partitions in topics.items()]
    futures = admin.create_topics(requested, operation_timeout=timeout_s, request_timeout=timeout_s)
    for name, future in futures.items():
        _await_creation(settings["bootstrap.servers"], name, future, timeout_s)
    wait_for_topics(admin, settings["bootstrap.servers"], topics, time.monotonic() + timeout_s)


def wait_for_topics(admin: AdminClient, bootstrap_servers: str, topics: Mapping[str, int], deadline: float) -> None:
    """Wait until every topic is in the metadata with a leader for each partition (brokers learn of new topics late)."""
    missing = sorted(topics)

    def ready() -> bool:
        nonlocal missing
        missing = _not_ready(admin, topics, deadline)
        return not missing

    if not wait_until(ready, deadline):
        raise BrokerUnavailableError(bootstrap_servers, f"topics {', '.join(missing)} not in its metadata in time")


def _await_creation(bootstrap_servers: str, name: str, future: Any, timeout_s: float) -> None:
    try:
        future.result(timeout=timeout_s)
    except KafkaException as e:
        if e.args and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            _log.info("topic %s exists already; kept as it is", name)
            return
        if is_unreachable(e):
            raise BrokerUnavailableError(bootstrap_servers, f"creating {name}: {e.args[0].str()}") from e
        raise
    except TimeoutError as e:
        raise BrokerUnavailableError(bootstrap_servers, f"creating {name} timed out after {timeout_s}s") from e


def _not_ready(admin: AdminClient, topics: Mapping[str, int], deadline: float) -> list[str]:
    try:
        metadata = admin.list_topics(timeout=max(0.1, min(deadline - time.monotonic(), _METADATA_ATTEMPT_S)))
    except KafkaException:
        return sorted(topics)
    return [name for name in topics if not _has_leaders(metadata, name)]


def _has_leaders(metadata: ClusterMetadata, topic: str) -> bool:
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        return False
    return all(partition.leader >= 0 for partition in found.partitions.values())


def await_broker(child: ChildProcess, port: int, cluster_id: str, deadline: float, host: str = HOST) -> str | None:
    """None once the broker answers metadata as itself (its cluster id: not another broker on a reused port)."""
    started = time.monotonic()
    wait_until(lambda: not child.running() or accepts_connections(host, port), deadline)
    metadata = first_metadata(f"{host}:{port}", deadline, child.running)
    if not child.running():
        return f"exited with code {child.exit_code()} before answering Kafka metadata"
    if metadata is None:
        return f"did not answer Kafka metadata within {(deadline - started) * 1000:.0f} ms"
    if metadata.cluster_id != cluster_id:
        return f"was not reachable: another broker (cluster {metadata.cluster_id!r}) answers on that port"
    return None


def await_brokers(bootstrap_servers: str, count: int, deadline: float) -> None:
    """Wait until the cluster's metadata lists `count` brokers (each node answers before all have registered)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "logger": KAFKA_LOGGER})  # type: ignore[dict-item]
    seen = 0

    def registered() -> bool:
        nonlocal seen
        try:
            seen = len(admin.list_topics(timeout=_METADATA_ATTEMPT_S).brokers)
        except KafkaException:
            return False
        return seen >= count

    if not wait_until(registered, deadline):
        raise BrokerUnavailableError(bootstrap_servers, f"{seen} of its {count} brokers registered in time")
