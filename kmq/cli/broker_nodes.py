"""`kmq broker --nodes N` while it runs: a dead node is reported and the survivors go on serving while they are a
quorum; `--restart-dead-after` starts a dead node again on its data and ports."""

from __future__ import annotations

import threading
import time

import typer

from kmq.embedded import EmbeddedKafka
from kmq.embedded._kafka_nodes import KafkaNodes
from kmq.embedded._node_watch import NodeWatch, describe_exit
from kmq.errors import EmbeddedBrokerError

_TAIL_LINES = 15


class QuorumLost(EmbeddedBrokerError):
    """Fewer than a quorum of the cluster's nodes runs: the cluster cannot serve."""


def watch_cluster(
    kafka: EmbeddedKafka, stop_requested: threading.Event, check_s: float, restart_after_ms: int | None
) -> None:
    """Until a stop is requested: report each node that dies, start dead ones again when due; `QuorumLost` when
    fewer than a quorum is left."""
    nodes = kafka.nodes
    watch = NodeWatch(nodes.ids, restart_after_ms)
    while not stop_requested.wait(check_s):
        turn = watch.look({node: nodes.running(node) for node in nodes.ids}, _now_ms())
        for node in turn.died:
            typer.echo(_death(nodes, node, len(nodes.ids) - len(watch.down), watch.quorum), err=True)
        if turn.quorum_lost:
            raise QuorumLost(
                f"{len(nodes.ids) - len(watch.down)} of {len(nodes.ids)} Kafka nodes left, fewer than a quorum"
                f" ({watch.quorum}): nodes {', '.join(map(str, watch.down))} are down; the cluster is stopped"
            )
        for node in turn.restart:
            if stop_requested.is_set():
                return
            _restart(nodes, watch, node)


def _restart(nodes: KafkaNodes, watch: NodeWatch, node: int) -> None:
    typer.echo(f"starting Kafka node {node} ({nodes.address(node)}) again on its data")
    try:
        nodes.start(node)
    except EmbeddedBrokerError as e:
        watch.start_failed(node, _now_ms())
        typer.echo(f"Kafka node {node} did not start again (next attempt later): {e}", err=True)
        return
    watch.started(node)
    typer.echo(f"Kafka node {node} is back at {nodes.address(node)} (pid {nodes.pid(node)})")


def _death(nodes: KafkaNodes, node: int, alive: int, quorum: int) -> str:
    tail = "\n".join(nodes.output_tail(node).splitlines()[-_TAIL_LINES:])
    return (
        f"Kafka node {node} ({nodes.address(node)}) died: {describe_exit(nodes.exit_code(node))}; "
        f"{alive} of {len(nodes.ids)} nodes serve on (quorum {quorum}). The end of its log:\n{tail}"
    )


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000
