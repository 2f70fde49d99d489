"""The kafka backend: Apache Kafka from Maven Central, one KRaft node (broker and controller) on loopback.

The jars are resolved once into `~/.cache/kmq/kafka/<version>` (see `_jvm`); `KMQ_KAFKA_VERSION` picks another
version (3.9.x and 4.x start the same way here). Storage is formatted with Kafka's own `StorageTool` in a temporary
folder that holds the data and the broker's log file, removed on stop unless the data is kept for a restart.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from kmq.config import KafkaValue
from kmq.embedded._child import ChildProcess
from kmq.embedded._jvm import java_binary, resolve_jars
from kmq.embedded._kafka_config import log_settings, server_properties
from kmq.embedded._ports import HOST, free_port
from kmq.embedded._topics import await_broker, create_topics
from kmq.errors import EmbeddedBrokerError

KAFKA_VERSION = "4.4.0"
"""The Apache Kafka release the kafka backend runs unless `KMQ_KAFKA_VERSION` says otherwise."""
# A short session lets a crashed consumer's partitions move in ~2 s (the broker allows it: group.min.session...).
CONSUMER_KAFKA_CONFIG: Mapping[str, KafkaValue] = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 500}
_HEAP = "-Xmx512m"
_LOG_TAIL_LINES = 40
_FORMAT_TIMEOUT_S = 120
_PORT_ATTEMPTS = 3
_PORT_TAKEN = "Address already in use"


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


class KafkaBroker:
    """One Apache Kafka KRaft node in a child process; restartable on the same data and ports."""

    name = "kafka"
    stop_signal = signal.SIGTERM
    kafka_config: ClassVar[Mapping[str, KafkaValue]] = {}
    consumer_kafka_config: ClassVar[Mapping[str, KafkaValue]] = CONSUMER_KAFKA_CONFIG

    def __init__(self, port: int | None) -> None:
        self.version = kafka_version()
        self._requested_port = port
        self._child: ChildProcess | None = None
        self._workdir: Path | None = None
        self._ports: tuple[int, int] | None = None
        self._cluster_id = ""

    @property
    def child(self) -> ChildProcess | None:
        return self._child

    @property
    def log_file(self) -> Path | None:
        return None if self._workdir is None else self._workdir / "broker.log"

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

    def _launch(self, java: str, classpath: str, deadline: float) -> str:
        assert self._workdir is not None and self._ports is not None
        port = self._ports[0]
        child = ChildProcess(f"kafka:{port}", self._server_argv(java, classpath), env=_jvm_env())
        failure = await_broker(child, port, self._cluster_id, deadline)
        if failure is not None:
            child.stop(timeout_ms=5000)
            raise EmbeddedBrokerError(
                f"Apache Kafka {self.version} on {HOST}:{port} {failure}; "
                f"the end of its log ({self.log_file}):\n{self.output_tail(child)}"
            )
        self._child = child
        return f"{HOST}:{port}"

    def stop_process(self, timeout_ms: int, keep_data: bool) -> int:
        """Stop the JVM (SIGTERM, then SIGKILL after `timeout_ms`); drop the data unless it is kept for a restart."""
        code = self._child.stop(timeout_ms, self.stop_signal) if self._child is not None else 0
        if not keep_data:
            self.discard()
        return code

    def discard(self) -> None:
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        self._workdir, self._ports = None, None

    def create_topics(self, topics: Mapping[str, int], timeout_ms: int) -> None:
        assert self._ports is not None
        create_topics({"bootstrap.servers": f"{HOST}:{self._ports[0]}"}, topics, 1, timeout_ms)

    def output_tail(self, child: ChildProcess | None = None) -> str:
        """The end of the broker's log file, then what the JVM printed (warnings, errors, crashes)."""
        child = child or self._child
        parts = []
        if self.log_file is not None and self.log_file.is_file():
            with self.log_file.open(errors="replace") as log:
                parts.append("".join(deque(log, maxlen=_LOG_TAIL_LINES)).rstrip())
        if child is not None:
            parts.append(child.output_tail())
        return "\n".join(parts) or "(no output)"

    def _prepare(self, java: str, classpath: str) -> None:
        """A new data folder, ports and cluster id, and the storage formatted by Kafka's StorageTool."""
        self._workdir = Path(tempfile.mkdtemp(prefix="kmq-kafka-"))
        self._ports = (self._requested_port or free_port(), free_port())
        while self._ports[1] == self._ports[0]:
            self._ports = (self._ports[0], free_port())
        self._cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        props = self._workdir / "server.properties"
        props.write_text(server_properties(self._workdir / "data", *self._ports, self.version))
        for name, text in log_settings(self.log_file or self._workdir).items():
            (self._workdir / name).write_text(text)
        argv = [java, _HEAP, "-cp", classpath, "kafka.tools.StorageTool", "format"]
        argv += ["-t", self._cluster_id, "-c", str(props)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=_FORMAT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as e:
            self.discard()
            raise EmbeddedBrokerError(f"formatting Kafka's storage took over {_FORMAT_TIMEOUT_S}s") from e
        if done.returncode != 0:
            self.discard()
            raise EmbeddedBrokerError(f"Kafka's StorageTool failed to format the storage:\n{done.stdout}{done.stderr}")

    def _server_argv(self, java: str, classpath: str) -> list[str]:
        assert self._workdir is not None
        workdir = self._workdir
        return [
            java,
            _HEAP,
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
            f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}",
            f"-Dkafka.logs.dir={workdir}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(workdir / "server.properties"),
        ]


def _jvm_env() -> dict[str, str]:
    # KAFKA_OPTS / JAVA_TOOL_OPTIONS of the user's shell would change the broker (an agent, another heap): not ours.
    return {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS")}
