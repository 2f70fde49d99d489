"""The Kafka edge shared by kmq, the tracker and the REST facade: librdkafka settings per kind of client,
producing with back-pressure, and consuming without waiting for a batch to fill."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import Message as KafkaMessage

from kmq.config import KafkaValue, KmqConfig
from kmq.errors import BrokerUnavailableError, KafkaSecurityError
from kmq.headers import SendHeaders, to_send

KafkaSettings = dict[str, KafkaValue]

_PRODUCER_DEFAULTS: KafkaSettings = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}
_CONSUMER_DEFAULTS: KafkaSettings = {"auto.offset.reset": "earliest", "enable.auto.offset.store": False}
# librdkafka's own log lines go through Python logging (callers set its level), not straight to stderr.
KAFKA_LOGGER = logging.getLogger("kmq.kafka")
_UNREACHABLE = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN})
_SECURITY = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED})
_AUTHORIZATION = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED})


def producer_settings(config: KmqConfig, **extra: KafkaValue) -> KafkaSettings:
    """An idempotent `acks=all` producer; the user's pass-through may tune it (not weaken durability)."""
    return {**_PRODUCER_DEFAULTS, **admin_settings(config), **_dotted(extra), "acks": "all"}


def marker_producer_settings(config: KmqConfig, **extra: KafkaValue) -> KafkaSettings:
    """`producer_settings` for a producer of markers: delivery reports for failures only, so a marker acknowledged
    costs no Python callback (confluent-kafka still frees each record's state in C)."""
    return producer_settings(config, delivery_report_only_error=True, **extra)


def consumer_settings(config: KmqConfig, group_id: str, **extra: KafkaValue) -> KafkaSettings:
    """A consumer in `group_id` that never commits on its own: kmq commits explicitly."""
    return {
        **_CONSUMER_DEFAULTS,
        **admin_settings(config),
        **config.consumer_kafka_config,
        **_dotted(extra),
        "group.id": group_id,
        "enable.auto.commit": False,
    }


def admin_settings(config: KmqConfig) -> KafkaSettings:
    return {**config.kafka_settings(), "logger": KAFKA_LOGGER}  # type: ignore[dict-item]  # librdkafka takes a Logger


class SecurityWatch:
    """An `error_cb` that keeps the first authentication or TLS failure a client reports, so a caller waiting for
    the cluster can stop at once: librdkafka itself would retry such a connection forever."""

    def __init__(self) -> None:
        self.failure: KafkaError | None = None

    def __call__(self, error: KafkaError) -> None:
        if self.failure is None and error.code() in _SECURITY:
            self.failure = error


def security_error(config: KmqConfig, error: KafkaError) -> KafkaSecurityError:
    """What to fix, in words: the credentials (user and mechanism named, the password never) or the CA."""
    detail = error.str().split(": ", 1)[-1]  # without the broker's address, which the error names already
    if error.code() == KafkaError._SSL:
        trusted = f"ssl_ca_location={config.ssl_ca_location}" if config.ssl_ca_location else "the system's CAs"
        return KafkaSecurityError(
            config.bootstrap_servers,
            f"TLS failed: {detail}; the broker's certificate must be signed by a CA in {trusted} (KMQ_SSL_CA_LOCATION)",
        )
    return KafkaSecurityError(
        config.bootstrap_servers,
        f"SASL authentication of user {config.sasl_username!r} ({config.sasl_mechanism or 'no mechanism set'}) "
        f"failed: {detail}; check KMQ_SASL_USERNAME and KMQ_SASL_PASSWORD or KMQ_SASL_PASSWORD_FILE",
    )


def delivery_detail(error: KafkaError, topic: str) -> str:
    """A failed write in words; an ACL refusal names the permission missing on `topic` and how to grant it."""
    if error.code() in _AUTHORIZATION:
        return (
            f"this client's principal lacks the Write permission on topic {topic!r} ({error.name()}): grant it, "
            f"e.g. `kafka-acls --add --allow-principal User:<name> --operation Write --topic {topic}`"
        )
    return error.str()


def is_unreachable(error: KafkaException | KafkaError) -> bool:
    err = error.args[0] if isinstance(error, KafkaException) and error.args else error
    return isinstance(err, KafkaError) and err.code() in _UNREACHABLE


def unavailable(config: KmqConfig, error: Any) -> BrokerUnavailableError:
    detail = error.args[0].str() if isinstance(error, KafkaException) and error.args else str(error)
    return BrokerUnavailableError(config.bootstrap_servers, detail)


def _dotted(extra: dict[str, KafkaValue]) -> KafkaSettings:
    """Python keyword names (`linger_ms`) to librdkafka names (`linger.ms`)."""
    return {key.replace("_", "."): value for key, value in extra.items()}


DeliveryCallback = Callable[[KafkaError | None, KafkaMessage], None]
ANY_PARTITION = -1  # librdkafka's RD_KAFKA_PARTITION_UA: let the partitioner choose


def is_unknown_partition(error: KafkaError | None) -> bool:
    return error is not None and error.code() == KafkaError._UNKNOWN_PARTITION


def learn_partitions(producer: Producer, topic: str, timeout_s: float = 5.0) -> None:
    """Refresh `producer`'s metadata of `topic` now. librdkafka refuses a record for a partition its metadata does
    not have (_UNKNOWN_PARTITION) until its next periodic refresh (`topic.metadata.refresh.interval.ms`, 5 min by
    default): after `kmq topics grow` a running client would refuse the new partitions' markers that long. A failed
    refresh is left to the retried produce, which then fails as it did."""
    try:
        producer.list_topics(topic, timeout=timeout_s)
    except KafkaException as e:
        KAFKA_LOGGER.warning("refreshing the partitions of %s: %s", topic, e)


def produce(
    producer: Producer,
    topic: str,
    value: bytes | None,
    key: bytes | None = None,
    headers: SendHeaders | None = None,
    partition: int = ANY_PARTITION,
    on_delivery: DeliveryCallback | None = None,
    timestamp_ms: int = 0,
) -> None:
    """Produce one record, serving delivery reports to make room while the local queue is full, and learning of
    partitions added to `topic` since the producer last read its metadata. `headers` may be a mapping or any
    sequence of pairs, such as a received `Message.headers` (a tuple, which confluent-kafka refuses: it is given a
    list)."""
    pairs = to_send(headers)
    learned = False
    while True:
        try:
            producer.produce(
                topic,
                value=value,
                key=key,
                headers=cast("list[tuple[str, str | bytes | None]] | None", pairs),
                partition=partition,
                on_delivery=on_delivery,
                timestamp=timestamp_ms,
            )
        except BufferError:
            producer.poll(0.05)
        except KafkaException as e:
            if learned or not is_unknown_partition(e.args[0]):
                raise
            learn_partitions(producer, topic)
            learned = True
        else:
            return


def fetch(consumer: Consumer, max_messages: int, timeout_s: float) -> list[KafkaMessage]:
    """Up to `max_messages` records or events: what the consumer has fetched, at once; when it has none, it waits at
    most `timeout_s` for a first one, then takes what came with it.

    librdkafka's `consume(n, timeout)` returns only once it has `n` records or the timeout has passed: asked for more
    than was fetched, it holds what it has for the whole timeout (a record on a quiet queue waits, and a timer-driven
    loop sleeps through its deadline). Usually one call: a consumer reading a busy topic has records buffered."""
    batch = consumer.consume(num_messages=max_messages, timeout=0)
    if batch or timeout_s <= 0:
        return batch
    batch = consumer.consume(num_messages=1, timeout=timeout_s)
    if batch and max_messages > 1:
        batch += consumer.consume(num_messages=max_messages - 1, timeout=0)
    return batch
