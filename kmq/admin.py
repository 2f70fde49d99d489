"""Topic administration: create the queue, markers and dead-letter topics, and check they line up."""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._metadata import ClusterMetadata, TopicMetadata
from confluent_kafka.cimpl import NewPartitions, NewTopic

from kmq.config import KmqConfig
from kmq.durability import TopicReplication, default_replication_factor, min_insync_replicas
from kmq.errors import ConfigError, TopicAdminError, TopicMismatchError, TopicMissingError
from kmq.kafka import SecurityWatch, admin_settings, is_unreachable, security_error, unavailable

_log = logging.getLogger(__name__)
_METADATA_RETRY_S = 0.1
_METADATA_SLICE_S = 1.0
MARKERS_RETENTION_MS = 7 * 24 * 3600 * 1000
_LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
_METADATA_POLL_S = 0.05


def ensure_topics(
    config: KmqConfig, partitions: int, replication_factor: int | None = None, timeout_s: float | None = None
) -> None:
    """Create Q, M and D where missing (M with Q's partition count, LogAppendTime where the broker accepts it).

    `replication_factor` defaults to min(3, brokers); M and D follow an existing Q's replication factor, and every
    topic created with replicas gets `min.insync.replicas=2` (kmq.durability). Existing topics are kept; the call
    then checks that M and Q have the same partition count. `timeout_s` bounds each broker request (default: the
    config's `metadata_timeout_ms`).
    """
    timeout_s = _timeout_s(config, timeout_s)
    if partitions < 1:
        raise ConfigError("partitions", "must be at least 1")
    if replication_factor is not None and replication_factor < 1:
        raise ConfigError("replication_factor", "must be at least 1")
    metadata = _metadata(config, timeout_s)
    replicas = replication_factor or default_replication_factor(len(metadata.brokers))
    queue = metadata.topics.get(config.queue_topic)
    if queue is not None and queue.error is None and queue.partitions:
        replicas = len(next(iter(queue.partitions.values())).replicas) or replicas  # M and D follow Q
    if replicas > (brokers := len(metadata.brokers)):
        raise ConfigError("replication_factor", f"{replicas} replicas need as many brokers; there are {brokers}")
    durable = {"min.insync.replicas": str(isr)} if (isr := min_insync_replicas(replicas)) else {}
    admin = AdminClient(admin_settings(config))
    markers_config = {
        "cleanup.policy": "delete",
        "retention.ms": str(max(MARKERS_RETENTION_MS, 10 * config.msg_timeout_ms)),
        **durable,
    }
    _create(admin, config, NewTopic(config.queue_topic, partitions, replicas, config=dict(durable)), timeout_s)
    if not _create(
        admin,
        config,
        NewTopic(config.markers_topic, partitions, replicas, config={**markers_config, **_LOG_APPEND_TIME}),
        timeout_s,
        tolerate_invalid_config=True,
    ):
        _log.warning("broker refused LogAppendTime on %s; deadlines follow producers' clocks", config.markers_topic)
        _create(admin, config, NewTopic(config.markers_topic, partitions, replicas, config=markers_config), timeout_s)
    _create(admin, config, NewTopic(config.dead_letter_topic, partitions, replicas, config=dict(durable)), timeout_s)
    _await_metadata(config, (config.queue_topic, config.markers_topic, config.dead_letter_topic), timeout_s, admin)
    if len(metadata.brokers) > 1:
        _await_every_broker(config, metadata, timeout_s)
    _check_created(config, timeout_s, admin)


def _check_created(config: KmqConfig, timeout_s: float, admin: AdminClient) -> None:
    """`check_topics` right after the topics were made: a broker that has not learned of them yet answers that one
    is missing (in a cluster a client's metadata request may go to any broker), so that is asked again until the
    timeout. Any other verdict stands at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            check_topics(config, max(0.1, deadline - time.monotonic()), admin)
        except TopicMissingError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(_METADATA_POLL_S)
        else:
            return


def _await_every_broker(config: KmqConfig, metadata: ClusterMetadata, timeout_s: float) -> None:
    """Wait until each broker knows the topics: in a cluster the others learn of a new topic from the controller a
    moment after its creation is acknowledged, and a client asking one of them then would find it missing."""
    deadline = time.monotonic() + timeout_s
    topics = (config.queue_topic, config.markers_topic, config.dead_letter_topic)
    for broker in metadata.brokers.values():
        admin = AdminClient({**admin_settings(config), "bootstrap.servers": f"{broker.host}:{broker.port}"})
        while True:
            try:
                known = admin.list_topics(timeout=max(0.1, deadline - time.monotonic())).topics
            except KafkaException as e:
                raise unavailable(config, e) from e
            if all(topic in known and known[topic].partitions for topic in topics):
                break
            if time.monotonic() >= deadline:
                raise unavailable(config, f"broker {broker.id} did not learn of the new topics in {timeout_s}s")
            time.sleep(_METADATA_RETRY_S)


def replication(config: KmqConfig, timeout_s: float | None = None) -> list[TopicReplication]:
    """How the queue, markers and dead-letter topics (those that exist) are replicated; `.warning()` of each says
    whether an acknowledged record could be lost with one broker."""
    timeout_s = _timeout_s(config, timeout_s)
    metadata = _metadata(config, timeout_s)
    topics = [config.queue_topic, config.markers_topic, config.dead_letter_topic]
    found = {t: metadata.topics[t] for t in topics if t in metadata.topics and metadata.topics[t].partitions}
    if not found:
        return []
    resources = [ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in found]
    admin = AdminClient(admin_settings(config))  # held while its futures are pending
    futures = admin.describe_configs(resources, request_timeout=timeout_s)
    result = []
    for resource, future in futures.items():
        try:
            entries = future.result(timeout=timeout_s)
        except KafkaException as e:
            raise unavailable(config, e) from e
        except TimeoutError as e:
            raise unavailable(config, f"describing {resource.name} timed out after {timeout_s}s") from e
        isr = int(entries["min.insync.replicas"].value or 1)
        rf = min(len(p.replicas) for p in found[resource.name].partitions.values())
        result.append(TopicReplication(resource.name, len(metadata.brokers), rf, isr))
    return sorted(result, key=lambda r: topics.index(r.topic))


def _await_metadata(
    config: KmqConfig, topics: tuple[str, ...], timeout_s: float, admin: AdminClient, partitions: int = 1
) -> None:
    """Until metadata shows every topic with `partitions` partitions or more, each with a leader: a broker learns of
    a topic (or partitions) just created a moment after the controller answered, and a check before then would find
    it missing. Asks through `admin` (the creating client, connected already: a new client for each ask cost a
    connection, ~40 ms, each time)."""
    deadline = time.monotonic() + timeout_s
    while True:
        metadata = _metadata(config, timeout_s, admin)
        found = [metadata.topics.get(topic) for topic in topics]
        if all(t is not None and t.error is None and len(t.partitions) >= partitions and _led(t) for t in found):
            return
        if time.monotonic() >= deadline:
            return  # check_topics names what is missing
        time.sleep(_METADATA_POLL_S)


def _led(topic: TopicMetadata) -> bool:
    return all(partition.leader >= 0 for partition in topic.partitions.values())


def check_topics(
    config: KmqConfig, timeout_s: float | None = None, admin: AdminClient | Consumer | None = None,
    watch: SecurityWatch | None = None,
) -> int:  # fmt: skip
    """The queue's partition count; raises when Q or M is missing or their counts differ.

    `admin`: a client to reuse (a probe asking every few seconds must not build one, and its connections, each time;
    the Spark source's driver asks through its consumer, before assigning it: `poll(0)` then consumes nothing), and
    `watch` its `error_cb`, if it has one (a refused login then fails at once).
    """
    metadata = _metadata(config, _timeout_s(config, timeout_s), admin, watch)
    queue_partitions = _partitions(config, metadata, config.queue_topic)
    markers_partitions = _partitions(config, metadata, config.markers_topic)
    if queue_partitions != markers_partitions:
        raise TopicMismatchError(config.queue_topic, queue_partitions, config.markers_topic, markers_partitions)
    return queue_partitions


def grow_topics(config: KmqConfig, partitions: int, timeout_s: float | None = None) -> None:
    """Give the queue and markers topics `partitions` partitions each: markers first, so a START for a message of a
    new queue partition always has its markers partition. Kafka cannot remove partitions: fewer is refused."""
    timeout_s = _timeout_s(config, timeout_s)
    metadata = _metadata(config, timeout_s)
    current = {topic: _partitions(config, metadata, topic) for topic in (config.markers_topic, config.queue_topic)}
    largest = max(current.values())
    if partitions < largest:
        raise ConfigError(
            "partitions", f"Kafka cannot remove partitions: ask for {largest} or more (now: {_counts(current)})"
        )
    admin = AdminClient(admin_settings(config))
    for topic, count in current.items():
        if count < partitions:
            future = admin.create_partitions([NewPartitions(topic, partitions)], request_timeout=timeout_s)[topic]
            try:
                future.result(timeout=timeout_s)
            except KafkaException as e:
                if is_unreachable(e):
                    raise unavailable(config, e) from e
                raise TopicAdminError(topic, f"adding partitions: {e.args[0].str()}") from e
            except TimeoutError as e:
                raise unavailable(config, f"adding partitions to {topic} timed out after {timeout_s}s") from e
            _log.info("%s: %d partitions (was %d)", topic, partitions, count)
    # a broker learns of new partitions a moment after the controller made them: checked at once, the markers could
    # show grown and the queue not yet
    _await_metadata(config, (config.markers_topic, config.queue_topic), timeout_s, admin, partitions)
    check_topics(config, timeout_s)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{topic} has {count}" for topic, count in counts.items())


def topic_partitions(config: KmqConfig, topic: str, timeout_s: float | None = None) -> int:
    """The partition count of `topic`; raises TopicMissingError when it does not exist."""
    return _partitions(config, _metadata(config, _timeout_s(config, timeout_s)), topic)


def _timeout_s(config: KmqConfig, timeout_s: float | None) -> float:
    return config.metadata_timeout_ms / 1000 if timeout_s is None else timeout_s


def _metadata(
    config: KmqConfig, timeout_s: float, admin: AdminClient | Consumer | None = None, watch: SecurityWatch | None = None
) -> ClusterMetadata:
    """The cluster's metadata, through `admin` when given (a long-lived client: the REST facade's probes), else a
    new client that raises KafkaSecurityError as soon as the credentials or the TLS certificate are refused (asked
    in short slices, so that is seconds, not the whole timeout; a given client does too when `watch` is its
    `error_cb`)."""
    # All topics, not one by name: a Metadata request for a missing topic may auto-create it on some clusters.
    if admin is None:  # (not `admin or ...`: an AdminClient is falsy)
        watch = SecurityWatch()
        admin = AdminClient({**admin_settings(config), "error_cb": watch})  # type: ignore[dict-item]  # a callable
    elif watch is None:
        watch = SecurityWatch()  # nothing reports to it: the metadata timeout decides
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return admin.list_topics(timeout=max(0.1, min(_METADATA_SLICE_S, deadline - time.monotonic())))
        except KafkaException as e:
            admin.poll(0)  # serves error_cb
            if watch.failure is not None:
                raise security_error(config, watch.failure) from e
            if time.monotonic() >= deadline:
                raise unavailable(config, e) from e


def _partitions(config: KmqConfig, metadata: ClusterMetadata, topic: str) -> int:
    found = metadata.topics.get(topic)
    if found is None or (found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise TopicMissingError(topic, config.bootstrap_servers)
    if found.error is not None:
        raise unavailable(config, found.error)
    return len(found.partitions)


def _create(
    admin: AdminClient, config: KmqConfig, topic: NewTopic, timeout_s: float, tolerate_invalid_config: bool = False
) -> bool:
    """Create one topic; True when it exists afterwards, False when the broker refused its config."""
    future = admin.create_topics([topic], operation_timeout=timeout_s, request_timeout=timeout_s)[topic.topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as e:
        code = e.args[0].code() if e.args else None
        if code == KafkaError.TOPIC_ALREADY_EXISTS:
            return True
        if tolerate_invalid_config and code in (KafkaError.INVALID_CONFIG, KafkaError.POLICY_VIOLATION):
            return False
        if is_unreachable(e):
            raise unavailable(config, e) from e
        raise
    except TimeoutError as e:
        raise unavailable(config, f"creating {topic.topic} timed out after {timeout_s}s") from e
    _log.info("created topic %s with %d partitions", topic.topic, topic.num_partitions)
    return True
