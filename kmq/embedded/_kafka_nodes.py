"""`KafkaNodes`: one node of an embedded Apache Kafka cluster at a time, stopped, killed, paused or restarted."""

from __future__ import annotations

import logging
import signal

from kmq.embedded._kafka import KafkaBroker

_log = logging.getLogger(__name__)


class KafkaNodes:
    """Fault injection on the nodes of `EmbeddedKafka(..., nodes=3)`, addressed by their KRaft node id (1, 2, 3)."""

    def __init__(self, broker: KafkaBroker, start_timeout_ms: int, stop_timeout_ms: int) -> None:
        self._broker = broker
        self._start_timeout_ms, self._stop_timeout_ms = start_timeout_ms, stop_timeout_ms

    @property
    def ids(self) -> list[int]:
        return [node.node_id for node in self._broker.nodes]

    def address(self, node_id: int) -> str:
        """Where clients reach the node (through its relay when the cluster is relayed)."""
        node = self._broker.node(node_id)
        return f"{self._broker.host}:{self._broker.client_port(node)}"

    def pid(self, node_id: int) -> int | None:
        node = self._broker.node(node_id)
        return node.child.pid if node.running() and node.child is not None else None

    def running(self, node_id: int) -> bool:
        return self._broker.node(node_id).running()

    def exit_code(self, node_id: int) -> int | None:
        """How the node's JVM ended (negative: the signal that killed it); None while it runs or never ran."""
        child = self._broker.node(node_id).child
        return None if child is None else child.exit_code()

    def output_tail(self, node_id: int) -> str:
        """The end of the node's log file, then what its JVM printed."""
        return self._broker.node(node_id).output_tail()

    def kill(self, node_id: int) -> None:
        """SIGKILL the node's JVM (a crash: no controlled shutdown) and reap it; its data stays for `start`."""
        code = self._broker.node(node_id).kill()
        _log.info("Kafka node %d killed (exit code %d)", node_id, code)

    def stop(self, node_id: int) -> None:
        """Stop the node politely (SIGTERM: controlled shutdown, leadership handed over); its data stays."""
        code = self._broker.node(node_id).stop(self._stop_timeout_ms, signal.SIGTERM)
        _log.info("Kafka node %d stopped (exit code %d)", node_id, code)

    def pause(self, node_id: int) -> None:
        """SIGSTOP the node: a broker that hangs (GC pause, stalled disk) with its connections open."""
        self._broker.node(node_id).signal(signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self._broker.node(node_id).signal(signal.SIGCONT)

    def start(self, node_id: int) -> None:
        """Start a stopped or killed node again on its data and ports; returns once it answers metadata."""
        self._broker.start_node(node_id, self._start_timeout_ms)
        _log.info("Kafka node %d started again", node_id)
