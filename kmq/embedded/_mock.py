"""The mock backend: librdkafka's mock cluster in a child process (`_mock_server`), topics made over its stdin."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from confluent_kafka.admin import AdminClient

from kmq.config import KafkaValue
from kmq.embedded._child import ChildProcess, InMemoryBroker
from kmq.embedded._topics import check_partition_counts, first_metadata, wait_for_topics
from kmq.errors import EmbeddedBrokerError

# The mock answers an empty fetch only after fetch.wait.max.ms (500 ms by default). A short session lets a crashed
# consumer's partitions move in ~2 s, as on the tansu backend, so tests behave alike on both.
CONSUMER_KAFKA_CONFIG: Mapping[str, KafkaValue] = {
    "fetch.wait.max.ms": 10,
    "session.timeout.ms": 2000,
    "heartbeat.interval.ms": 500,
}
PORT_UNSUPPORTED = (
    "the mock backend cannot listen on a chosen port: librdkafka's mock cluster always binds an ephemeral port; "
    "leave the port unset or use the tansu backend"
)
_KMQ_ROOT = str(Path(__file__).resolve().parents[2])


class MockBroker(InMemoryBroker):
    """One mock-cluster process; the port is librdkafka's pick (a chosen port is refused up front)."""

    name = "mock"
    stop_signal = signal.SIGTERM
    kafka_config: ClassVar[Mapping[str, KafkaValue]] = {}
    consumer_kafka_config: ClassVar[Mapping[str, KafkaValue]] = CONSUMER_KAFKA_CONFIG

    def __init__(self, port: int | None) -> None:
        if port is not None:
            raise EmbeddedBrokerError(PORT_UNSUPPORTED)
        self._child: ChildProcess | None = None
        self._bootstrap_servers = ""
        self._control = threading.Lock()

    def start(self, timeout_ms: int) -> str:
        deadline = time.monotonic() + timeout_ms / 1000
        argv = [sys.executable, "-m", "kmq.embedded._mock_server", f"--parent-pid={os.getpid()}"]
        child = ChildProcess("mock", argv, control=True, env=_child_env())
        ready = child.receive(timeout_ms)
        if ready is not None and ready.startswith("READY "):
            self._bootstrap_servers = ready.removeprefix("READY ")
            if first_metadata(self._bootstrap_servers, deadline, child.running) is not None:
                self._child = child
                return self._bootstrap_servers
        child.stop(timeout_ms=1000)
        raise EmbeddedBrokerError(
            f"mock broker ({sys.executable} -m kmq.embedded._mock_server) did not become ready within "
            f"{timeout_ms} ms ({ready or 'no answer'}, exit code {child.exit_code()}); "
            f"its last output:\n{child.output_tail()}"
        )

    def create_topics(self, topics: Mapping[str, int], timeout_ms: int) -> None:
        """Create each missing topic through the control channel (existing ones are kept), then wait for metadata."""
        check_partition_counts(topics)
        for name, partitions in topics.items():
            answer = self._command(f"CREATE {name} {partitions}", timeout_ms)
            if answer != "OK" and "already exists" not in answer:
                raise EmbeddedBrokerError(f"mock broker could not create topic {name!r}: {answer}")
        admin = AdminClient({"bootstrap.servers": self._bootstrap_servers})
        wait_for_topics(admin, self._bootstrap_servers, topics, time.monotonic() + timeout_ms / 1000)

    def _command(self, line: str, timeout_ms: int) -> str:
        child = self._child
        assert child is not None, "the mock broker is not running"
        with self._control:
            try:
                child.send(line)
            except OSError as e:
                raise EmbeddedBrokerError(f"mock broker is gone ({e}); its last output:\n{child.output_tail()}") from e
            answer = child.receive(timeout_ms)
        if answer is None:
            raise EmbeddedBrokerError(f"mock broker did not answer {line!r}; its last output:\n{child.output_tail()}")
        return answer


def _child_env() -> dict[str, str]:
    """Our environment, with kmq importable in the child even when the parent found it through sys.path tweaks."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_KMQ_ROOT, path]))}
