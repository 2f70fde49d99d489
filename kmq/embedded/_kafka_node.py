"""One node of the embedded Apache Kafka: its folder (data, configuration, log), its two ports and its JVM."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import deque
from pathlib import Path

from kmq.embedded._child import ChildProcess
from kmq.embedded._kafka_config import log_settings
from kmq.errors import EmbeddedBrokerError

_LOG_TAIL_LINES = 40
_FORMAT_TIMEOUT_S = 120
_REAP_TIMEOUT_MS = 10_000


class KafkaNode:
    """A KRaft node (broker and controller) in `workdir`, listening on `port` (clients), `controller_port`, and
    `secure_port` (SASL_SSL) when it is not 0."""

    def __init__(
        self, node_id: int, workdir: Path, port: int, controller_port: int, secure_port: int = 0, *, heap: str
    ) -> None:
        self.node_id, self.workdir, self.port, self.controller_port = node_id, workdir, port, controller_port
        self.secure_port = secure_port
        self._heap = heap
        self.child: ChildProcess | None = None

    @property
    def log_file(self) -> Path:
        return self.workdir / "broker.log"

    @property
    def properties(self) -> Path:
        return self.workdir / "server.properties"

    def write_config(self, server_properties: str) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.properties.write_text(server_properties)
        for name, text in log_settings(self.log_file).items():
            (self.workdir / name).write_text(text)

    def format_storage(self, java: str, classpath: str, cluster_id: str) -> subprocess.Popen[str]:
        """Kafka's StorageTool formatting this node's data folder (started: `await_format` waits for it)."""
        argv = [java, self._heap, "-cp", classpath, "kafka.tools.StorageTool", "format"]
        argv += [f"--cluster-id={cluster_id}", "-c", str(self.properties)]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def launch(self, java: str, classpath: str) -> ChildProcess:
        self.child = ChildProcess(f"kafka:{self.port}", self._server_argv(java, classpath), env=_jvm_env())
        return self.child

    def running(self) -> bool:
        return self.child is not None and self.child.running()

    def stop(self, timeout_ms: int, polite: signal.Signals = signal.SIGTERM) -> int:
        """Stop the JVM (`polite`, SIGKILL after `timeout_ms`); a stopped (SIGSTOP) JVM is continued first."""
        if self.child is None:
            return 0
        self.signal(signal.SIGCONT)
        return self.child.stop(timeout_ms, polite)

    def kill(self) -> int:
        """SIGKILL the JVM (a crash: no controlled shutdown) and reap it."""
        self.signal(signal.SIGKILL)
        return self.stop(_REAP_TIMEOUT_MS)

    def signal(self, signum: signal.Signals) -> None:
        if self.child is not None and self.child.running():
            os.kill(self.child.pid, signum)

    def output_tail(self, child: ChildProcess | None = None) -> str:
        """The end of the node's log file, then what the JVM printed (warnings, errors, crashes)."""
        child = child or self.child
        parts = []
        if self.log_file.is_file():
            with self.log_file.open(errors="replace") as log:
                parts.append("".join(deque(log, maxlen=_LOG_TAIL_LINES)).rstrip())
        if child is not None:
            parts.append(child.output_tail())
        return "\n".join(parts) or "(no output)"

    def _server_argv(self, java: str, classpath: str) -> list[str]:
        workdir = self.workdir
        return [
            java,
            self._heap,
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
            f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}",
            f"-Dkafka.logs.dir={workdir}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(self.properties),
        ]


def await_format(formatting: subprocess.Popen[str]) -> None:
    """Wait for a StorageTool run; EmbeddedBrokerError with its output if it failed or hung."""
    try:
        output, _ = formatting.communicate(timeout=_FORMAT_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        formatting.kill()
        formatting.communicate()
        raise EmbeddedBrokerError(f"formatting Kafka's storage took over {_FORMAT_TIMEOUT_S}s") from e
    if formatting.returncode != 0:
        raise EmbeddedBrokerError(f"Kafka's StorageTool failed to format the storage:\n{output}")


def _jvm_env() -> dict[str, str]:
    # KAFKA_OPTS / JAVA_TOOL_OPTIONS of the user's shell would change the broker (an agent, another heap): not ours.
    return {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS")}
