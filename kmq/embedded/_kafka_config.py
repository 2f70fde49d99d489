"""The embedded Kafka node's configuration files: server.properties and the logging setup of both Kafka lines."""

from __future__ import annotations

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
# Before 4.2 share groups are a preview that must be switched on; from 4.2 they are on by default.
_SHARE_PREVIEW = {"group.share.enable": "true", "group.coordinator.rebalance.protocols": "classic,consumer,share"}
_PATTERN = "[%d] %p %m (%c)%n"


def server_properties(data_dir: Path, port: int, controller_port: int, version: str) -> str:
    """One KRaft node acting as broker and controller, listening on loopback only."""
    settings: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir),
        **_SINGLE_NODE,
    }
    if _major_minor(version) in ((4, 0), (4, 1)):
        settings.update(_SHARE_PREVIEW)
    return "".join(f"{key}={value}\n" for key, value in settings.items())


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
