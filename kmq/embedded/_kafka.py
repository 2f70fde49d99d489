"""The kafka backend: Apache Kafka from Maven Central, KRaft nodes (each broker and controller) on loopback.

One node by default; `nodes=3` makes a cluster of three with a three-voter quorum, whose internal topics have three
replicas and min ISR 2, and whose nodes can be killed, paused (SIGSTOP) and restarted one by one.

The jars are resolved once into `~/.cache/kmq/kafka/<version>` (see `_jvm`); `KMQ_KAFKA_VERSION` picks another
version (3.9.x and 4.x start the same way here). Storage is formatted with Kafka's own `StorageTool` in a temporary
folder (one sub-folder per node when there are several) that holds the data and each node's log file, removed on
stop unless the data is kept for a restart.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

from kmq.config import KafkaValue
from kmq.embedded._child import ChildProcess
from kmq.embedded._jvm import java_binary, resolve_jars
from kmq.embedded._kafka_config import Relayed, secure_listener, server_properties
from kmq.embedded._kafka_node import KafkaNode, await_format
from kmq.embedded._ports import HOST, free_port
from kmq.embedded._tls import BrokerCertificates, make_certificates
from kmq.embedded._topics import await_broker, await_brokers, create_topics
from kmq.errors import EmbeddedBrokerError

KAFKA_VERSION = "4.4.0"
"""The Apache Kafka release the kafka backend runs unless `KMQ_KAFKA_VERSION` says otherwise."""
# A short session lets a crashed consumer's partitions move in ~2 s (the broker allows it: group.min.session...).
CONSUMER_KAFKA_CONFIG: Mapping[str, KafkaValue] = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 500}
_HEAP = "-Xmx512m"
ADMIN_USER = "admin"
"""The super user of a `secure` embedded broker's SASL_SSL listener."""
_CLUSTER_HEAP = "-Xmx384m"  # three JVMs on a small machine
_PORT_ATTEMPTS = 3
_PORT_TAKEN = "Address already in use"
Relay = Callable[[str, int], int]
"""`relay(link, port)`: the port a relay (e.g. a fault injector's proxy) listens on to forward to `port` of this host.
Links: `client-<n>` (clients to node n), `broker-<n>-from-<i>` (node i replicating from node n) and
`controller-<n>-from-<i>` (node i to node n's controller)."""


def kafka_version() -> str:
    return os.environ.get("KMQ_KAFKA_VERSION") or KAFKA_VERSION


def kafka_artifacts(version: str) -> list[str]:
    """Kafka's server jar and the logging binding its line uses (log4j 2 from 4.0 on, reload4j before)."""
    if int(version.split(".")[0]) >= 4:
        binding = ["org.apache.logging.log4j:log4j-slf4j-impl:2.25.5"]
    else:
        binding = ["org.slf4j:slf4j-reload4j:1.7.36"]
    return [f"org.apache.kafka:kafka_2.13:{version}", *binding]


def kafka_classpath(version: str) -> str:
    return os.pathsep.join(str(jar) for jar in resolve_jars("kafka", version, kafka_artifacts(version)))


def new_cluster_id(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A Kafka cluster id: 16 random bytes in URL-safe base64, never starting with "-" (Kafka's StorageTool would
    read such an id as an option: one start in 64 failed that way)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(random_bytes()).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBroker:
    """Apache Kafka KRaft nodes in child processes; restartable (all of them, or one) on the same data and ports."""

    name = "kafka"
    stop_signal = signal.SIGTERM
    kafka_config: ClassVar[Mapping[str, KafkaValue]] = {}
    consumer_kafka_config: ClassVar[Mapping[str, KafkaValue]] = CONSUMER_KAFKA_CONFIG

    def __init__(
        self, port: int | None, nodes: int = 1, secure: bool = False, host: str = HOST, relay: Relay | None = None
    ) -> None:
        if nodes < 1:
            raise EmbeddedBrokerError(f"an embedded Kafka cluster needs at least one node, not {nodes}")
        if relay is not None and secure:
            raise EmbeddedBrokerError("a relayed cluster has no SASL_SSL listener: choose relay or secure")
        self.version = kafka_version()
        self.node_count = nodes
        self.secure = secure
        self.host = host
        self.certificates: BrokerCertificates | None = None
        self._requested_port = port
        self._relay = relay
        self._relayed: dict[int, Relayed] = {}
        self._workdir: Path | None = None
        self._nodes: list[KafkaNode] = []
        self._cluster_id = ""

    @property
    def child(self) -> ChildProcess | None:
        """The first node's JVM (the only one of a single-node broker)."""
        return self._nodes[0].child if self._nodes else None

    @property
    def log_file(self) -> Path | None:
        return self._nodes[0].log_file if self._nodes else None

    @property
    def nodes(self) -> list[KafkaNode]:
        return list(self._nodes)

    def bootstrap_servers(self) -> str:
        """The nodes' client listeners (through their relays when the cluster is relayed)."""
        return ",".join(f"{self.host}:{self.client_port(node)}" for node in self._nodes)

    def client_port(self, node: KafkaNode) -> int:
        """The port clients reach `node` on: its relay's when the cluster is relayed, else its own."""
        relayed = self._relayed.get(node.node_id)
        return node.port if relayed is None else relayed.client_port

    def secure_bootstrap_servers(self) -> str:
        """The SASL_SSL listeners (a `secure` broker only)."""
        return ",".join(f"{self.host}:{node.secure_port}" for node in self._nodes if node.secure_port)

    def prepare(self) -> None:
        """Check Java and resolve the jars (once: they are cached)."""
        java_binary()
        kafka_classpath(self.version)

    def start(self, timeout_ms: int) -> str:
        java, classpath = java_binary(), kafka_classpath(self.version)
        deadline = time.monotonic() + timeout_ms / 1000
        if self._workdir is not None:  # a restart on the kept data and ports
            return self._launch(java, classpath, deadline)
        # Picked ports can be taken before Kafka binds them (it then exits): try new ones while time is left.
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            self._prepare(java, classpath)
            try:
                return self._launch(java, classpath, deadline)
            except EmbeddedBrokerError as e:
                self.discard()  # nobody holds a broker that never started: its folder goes now
                port_taken = _PORT_TAKEN in str(e) and not self._requested_port
                if not port_taken or attempt == _PORT_ATTEMPTS or time.monotonic() >= deadline:
                    raise
        raise AssertionError("unreachable")

    def start_node(self, node_id: int, timeout_ms: int) -> None:
        """Start one stopped or killed node again on its data and ports; returns once it answers metadata."""
        node = self.node(node_id)
        if node.running():
            raise EmbeddedBrokerError(f"Kafka node {node_id} is running already")
        java, classpath = java_binary(), kafka_classpath(self.version)
        self._await([node], [node.launch(java, classpath)], time.monotonic() + timeout_ms / 1000)

    def node(self, node_id: int) -> KafkaNode:
        for node in self._nodes:
            if node.node_id == node_id:
                return node
        known = ", ".join(str(node.node_id) for node in self._nodes) or "none: not started"
        raise EmbeddedBrokerError(f"no Kafka node {node_id} (nodes: {known})")

    def _launch(self, java: str, classpath: str, deadline: float) -> str:
        nodes = [node for node in self._nodes if not node.running()]
        self._await(nodes, [node.launch(java, classpath) for node in nodes], deadline)
        if len(self._nodes) > 1:
            await_brokers(self.bootstrap_servers(), len(self._nodes), deadline)
        return self.bootstrap_servers()

    def _await(self, nodes: list[KafkaNode], children: list[ChildProcess], deadline: float) -> None:
        for node, child in zip(nodes, children, strict=True):
            failure = await_broker(child, node.port, self._cluster_id, deadline, self.host)
            if failure is not None:
                tail = node.output_tail(child)
                for started in nodes:
                    started.stop(timeout_ms=5000)
                raise EmbeddedBrokerError(
                    f"Apache Kafka {self.version} on {self.host}:{node.port} {failure}; "
                    f"the end of its log ({node.log_file}):\n{tail}"
                )

    def stop_process(self, timeout_ms: int, keep_data: bool) -> int:
        """Stop the JVMs (SIGTERM, then SIGKILL after `timeout_ms`); drop the data unless it is kept for a restart.
        The first node's exit code."""
        # Nodes stopped one after another would wait for a quorum that the earlier ones took away: all are signalled
        # together, and a cluster whose data goes anyway is simply killed.
        polite = self.stop_signal if keep_data or len(self._nodes) == 1 else signal.SIGKILL
        for node in self._nodes:
            node.signal(polite)
        codes = [node.stop(timeout_ms, polite) for node in reversed(self._nodes)]
        if not keep_data:
            self.discard()
        return codes[-1] if codes else 0

    def discard(self) -> None:
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        self._workdir, self._nodes, self.certificates, self._relayed = None, [], None, {}

    def create_topics(self, topics: Mapping[str, int], timeout_ms: int) -> None:
        replication = min(3, len(self._nodes))
        create_topics({"bootstrap.servers": self.bootstrap_servers()}, topics, replication, timeout_ms)

    def output_tail(self) -> str:
        """The end of each node's log file, then what its JVM printed (warnings, errors, crashes)."""
        if len(self._nodes) == 1:
            return self._nodes[0].output_tail()
        return "\n".join(f"-- node {node.node_id}:\n{node.output_tail()}" for node in self._nodes) or "(no output)"

    def _prepare(self, java: str, classpath: str) -> None:
        """A new data folder, ports and cluster id, and each node's storage formatted by Kafka's StorageTool."""
        self._workdir = Path(tempfile.mkdtemp(prefix="kmq-kafka-"))
        ports: list[int] = [self._requested_port] if self._requested_port else []
        per_node = 3 if self.secure else 2
        # the relayed FROM<i> listeners, and the CONTROLLER_FROM<i> ones of the other nodes
        extra = 2 * self.node_count - 1 if self._relay is not None else 0
        while len(ports) < (per_node + extra) * self.node_count:
            port = free_port(self.host)
            if port not in ports:
                ports.append(port)
        self._cluster_id = new_cluster_id()
        heap = _HEAP if self.node_count == 1 else _CLUSTER_HEAP
        self._nodes = [
            KafkaNode(i + 1, self._node_dir(i + 1), *ports[per_node * i : per_node * (i + 1)], heap=heap)
            for i in range(self.node_count)
        ]
        voters = ",".join(f"{node.node_id}@{self.host}:{node.controller_port}" for node in self._nodes)
        try:
            self._relayed = {} if self._relay is None else self._relay_links(ports[per_node * self.node_count :])
            if self.secure:
                self.certificates = make_certificates(java, self._workdir / "tls")
            for node in self._nodes:
                node.write_config(self._node_properties(node, voters))
            for formatting in [node.format_storage(java, classpath, self._cluster_id) for node in self._nodes]:
                await_format(formatting)
        except EmbeddedBrokerError:
            self.discard()
            raise

    def _node_properties(self, node: KafkaNode, voters: str) -> str:
        secure = None
        if self.certificates is not None:
            keystore, password = self.certificates.keystore, self.certificates.password
            secure = secure_listener(node.secure_port, keystore, password, ADMIN_USER)
        ports = (node.port, node.controller_port)
        relayed = self._relayed.get(node.node_id)
        return server_properties(
            node.workdir / "data", *ports, self.version, node.node_id, voters, secure, self.host, relayed
        )

    def _relay_links(self, extra_ports: list[int]) -> dict[int, Relayed]:
        """Each node's relays (see `Relay`), made by the relay function before the nodes start."""
        assert self._relay is not None
        relay, ids, ports = self._relay, [node.node_id for node in self._nodes], iter(extra_ports)
        # Node n's listener ports for each source node i: FROM<i> (inter-broker) and, for i != n, CONTROLLER_FROM<i>.
        brokers = {n: {i: next(ports) for i in ids} for n in ids}
        controllers = {n: {i: next(ports) for i in ids if i != n} for n in ids}
        told = {(n, i): relay(f"controller-{n}-from-{i}", port) for n in ids for i, port in controllers[n].items()}
        relayed = {}
        for node in self._nodes:
            n = node.node_id
            voters = ",".join(
                f"{peer.node_id}@{self.host}:{node.controller_port if peer is node else told[peer.node_id, n]}"
                for peer in self._nodes
            )
            relayed[n] = Relayed(
                relay(f"client-{n}", node.port),
                {i: (port, port if i == n else relay(f"broker-{n}-from-{i}", port)) for i, port in brokers[n].items()},
                voters,
                {i: (port, told[n, i]) for i, port in controllers[n].items()},
            )
        return relayed

    def _node_dir(self, node_id: int) -> Path:
        assert self._workdir is not None
        return self._workdir if self.node_count == 1 else self._workdir / f"node-{node_id}"
