"""The embedded Kafka node's configuration files: server.properties and the logging setup of both Kafka lines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kmq.embedded._ports import HOST

# Fast tests on one node: no rebalance delay, internal topics with one replica and few partitions, short sessions
# allowed (the tests' consumers use 2 s so a killed worker's partitions move quickly), share groups on.
_SINGLE_NODE = {
    "num.partitions": 1,
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 5,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 5,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "share.coordinator.state.topic.num.partitions": 5,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 500,
    "num.network.threads": 2,
    "num.io.threads": 4,
    "log.retention.check.interval.ms": 60_000,
}
# A cluster of several nodes: internal topics replicated like the queues kmq creates there (RF 3, min ISR 2), and
# failure noticed in seconds (a killed or paused node is fenced after 4 s, a lagging follower leaves the ISR after 5 s)
# so the fault tests see leadership move quickly; production brokers keep Kafka's defaults.
_REPLICATED = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 2,
    "broker.session.timeout.ms": 4000,
    "broker.heartbeat.interval.ms": 1000,
    "replica.lag.time.max.ms": 5000,
    # Leadership moves only when a node fails or is cut off. Kafka's periodic preferred-leader election (every 300 s
    # by default) would move it back at a moment nobody chose: in a fault test it once did, right after a node cut
    # off from the others had lost its partitions, so the test found them led by that node again.
    "auto.leader.rebalance.enable": "false",
}
# Before 4.2 share groups are a preview that must be switched on; from 4.2 they are on by default.
_SHARE_PREVIEW = {"group.share.enable": "true", "group.coordinator.rebalance.protocols": "classic,consumer,share"}
_PATTERN = "[%d] %p %m (%c)%n"


@dataclass(frozen=True)
class Relayed:
    """A node whose peers reach it through relays (a fault injector's proxies): the client port it advertises,
    one inter-broker listener per source node (`FROM<i>`: its port here and the port node i is told to use), one
    controller listener per source node (`CONTROLLER_FROM<i>`, likewise), and the controller addresses this node
    uses (`voters`, each through the relay from this node to that one).

    A controller listener per source, not one: a KRaft leader tells the others its own controller endpoints (in
    BeginQuorumEpoch), and a node connects to the one named like its first controller listener. With one listener
    every node learnt the leader's real port and bypassed its relay, so a node cut off from the others by its relays
    still heartbeated to the leader directly and was never fenced."""

    client_port: int
    broker_ports: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    voters: str = ""
    controller_ports: Mapping[int, tuple[int, int]] = field(default_factory=dict)


def server_properties(
    data_dir: Path,
    port: int,
    controller_port: int,
    version: str,
    node_id: int = 1,
    voters: str = "",
    secure: Mapping[str, object] | None = None,
    host: str = HOST,
    relayed: Relayed | None = None,
) -> str:
    """One KRaft node acting as broker and controller, listening on `host` only (default: loopback); `voters`
    (`1@host:port,...`) are the controllers of a cluster of several nodes (default: this node alone); `secure`
    (`secure_listener`) adds a SASL_SSL listener for clients, with ACLs; `relayed` makes every peer (clients, the
    other brokers, the other controllers) reach this node through its own relay, so each link can be faulted."""
    nodes = voters.count("@") or 1
    listeners = f"PLAINTEXT://{host}:{port}"
    if secure:
        listeners += f",SASL_SSL://{host}:{secure['_port']}"
    settings: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.quorum.voters": voters or f"{node_id}@{host}:{controller_port}",
        "listeners": f"{listeners},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir),
        **_SINGLE_NODE,
    }
    if relayed is not None:
        settings.update(_relayed_listeners(node_id, host, listeners, controller_port, relayed))
    if nodes >= 3:
        settings.update(_REPLICATED)
    if secure:
        settings.update({k: v for k, v in secure.items() if not k.startswith("_")})
    if _major_minor(version) in ((4, 0), (4, 1)):
        settings.update(_SHARE_PREVIEW)
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _relayed_listeners(
    node_id: int, host: str, listeners: str, controller_port: int, relayed: Relayed
) -> dict[str, object]:
    # Node i replicates through the listener FROM<i> of the others (its inter-broker listener) and reaches their
    # controllers through CONTROLLER_FROM<i> (its first controller listener name): one relay per pair of nodes and
    # direction, so a node can be cut off from the others alone. Its own FROM<i> and CONTROLLER_FROM<i> are direct.
    brokers = {f"FROM{source}": ports for source, ports in sorted(relayed.broker_ports.items())}
    own_controller = {node_id: (controller_port, controller_port)}
    controllers = {
        f"CONTROLLER_FROM{source}": ports
        for source, ports in sorted({**relayed.controller_ports, **own_controller}.items())
    }
    here = ",".join(f"{name}://{host}:{ports[0]}" for name, ports in {**brokers, **controllers}.items())
    told = ",".join(f"{name}://{host}:{ports[1]}" for name, ports in {**brokers, **controllers}.items())
    first = f"CONTROLLER_FROM{node_id}"
    return {
        "listeners": f"{listeners},{here}",
        "advertised.listeners": f"PLAINTEXT://{host}:{relayed.client_port},{told}",
        "listener.security.protocol.map": ",".join(
            ["PLAINTEXT:PLAINTEXT", *(f"{name}:PLAINTEXT" for name in {**brokers, **controllers})]
        ),
        "controller.listener.names": ",".join([first, *(name for name in controllers if name != first)]),
        "inter.broker.listener.name": f"FROM{node_id}",
        "controller.quorum.voters": relayed.voters,
    }


def secure_listener(port: int, keystore: Path, keystore_password: str, admin_user: str) -> dict[str, object]:
    """A SASL_SSL listener on `port` taking SCRAM-SHA-512 users, TLS from a PKCS12 keystore, and Kafka's
    StandardAuthorizer: only ACLs let a user in; `admin_user` and the node's own loopback PLAINTEXT listener
    (User:ANONYMOUS, which the embedded broker uses to start, make topics and users) are super users."""
    return {
        "_port": port,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": keystore_password,
        "ssl.key.password": keystore_password,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:ANONYMOUS;User:{admin_user}",
        "allow.everyone.if.no.acl.found": "false",
    }


def log_settings(log_file: Path) -> dict[str, str]:
    """Everything at INFO into `log_file`, warnings and errors also on stdout; for log4j 2 (Kafka 4) and 1 (3.x)."""
    log4j2 = f"""status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = {_PATTERN}
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = {_PATTERN}
appender.out.filter.level.type = ThresholdFilter
appender.out.filter.level.level = warn
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
rootLogger.appenderRef.out.ref = OUT
"""
    log4j1 = f"""log4j.rootLogger=INFO, FILE, OUT
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File={log_file}
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern={_PATTERN}
log4j.appender.OUT=org.apache.log4j.ConsoleAppender
log4j.appender.OUT.Threshold=WARN
log4j.appender.OUT.layout=org.apache.log4j.PatternLayout
log4j.appender.OUT.layout.ConversionPattern={_PATTERN}
"""
    return {"log4j2.properties": log4j2, "log4j.properties": log4j1}


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = [*version.split("."), "0"][:2]
    return int(major), int(minor)
