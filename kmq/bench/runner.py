"""`run_bench`: every contender `repeat` times, alternating (A B C C B A ...) on one broker, then the medians."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kmq.bench.consumers import run_consumer
from kmq.bench.display import Display, Silent
from kmq.bench.external import run_http, run_tracker
from kmq.bench.machine import at_start, broker_version, machine
from kmq.bench.options import CONSUMERS, HTTP, SHARE, TRACKER, WARM_UP_ROUND, BenchOptions, split_variant
from kmq.bench.protocol import SHARE_UNAVAILABLE
from kmq.bench.results import Row, Run, rows
from kmq.bench.targets import Target, targets
from kmq.config import KmqConfig
from kmq.embedded import EmbeddedKafka, ExternalKafka, KafkaCluster
from kmq.embedded._external import CONNECTION_FIELDS
from kmq.errors import BenchError
from kmq.settings import read_env

# Contenders a broker cannot host, and why (the note printed in their row).
UNSUPPORTED = {
    ("tansu", SHARE): "tansu has no share groups (KIP-932); run with --backend kafka",
    ("mock", TRACKER): "its benchmark creates topics, and the mock broker has no CreateTopics; run on kafka",
    ("mock", HTTP): "its benchmark creates topics, and the mock broker has no CreateTopics; run on kafka",
}


@dataclass(frozen=True, slots=True)
class BenchReport:
    """Everything one `kmq bench` measured: each run's figures, the table rows (medians), the targets checked."""

    options: BenchOptions
    machine: dict[str, Any]
    runs: list[Run]
    rows: list[Row]
    targets: list[Target]
    notes: dict[str, str] = field(default_factory=dict)


def run_bench(options: BenchOptions, display: Display | None = None) -> BenchReport:
    """Measure on the broker the options name (an embedded one is started and stopped here)."""
    display = display or Silent()
    started = at_start()
    with open_cluster(options) as cluster:
        runs, notes = _run_all(cluster, options, display)
    table = rows(runs, options.measured, notes)
    measured_on = machine(options.broker, broker_version(options), started)
    return BenchReport(options, measured_on, runs, table, targets(runs, table, options.tracker_pending), notes)


@contextlib.contextmanager
def open_cluster(options: BenchOptions) -> Iterator[KafkaCluster]:
    """The cluster at `bootstrap_servers` (other connection settings from `KMQ_*`), or a fresh embedded broker."""
    if options.bootstrap_servers:
        connection = {k: v for k, v in read_env(KmqConfig).items() if k in CONNECTION_FIELDS}
        yield ExternalKafka({**connection, "bootstrap_servers": options.bootstrap_servers})
        return
    with EmbeddedKafka(options.backend) as embedded:
        yield embedded


def _run_all(cluster: KafkaCluster, options: BenchOptions, display: Display) -> tuple[list[Run], dict[str, str]]:
    notes = {
        name: UNSUPPORTED[(cluster.backend, split_variant(name)[0])]
        for name in options.measured
        if (cluster.backend, split_variant(name)[0]) in UNSUPPORTED
    }
    runs: list[Run] = []
    display.begin(len(options.schedule))
    try:
        # Warm-up, not counted: the same runs, once each, so that a cold broker's first round slows no contender.
        for name in options.measured if options.warm_up else ():
            display.run_started(name, WARM_UP_ROUND)
            _run_one(cluster, options, name, WARM_UP_ROUND, notes, display)
        for round_, name in options.schedule:
            display.run_started(name, round_)
            run = _run_one(cluster, options, name, round_, notes, display)
            runs.append(run)
            display.run_finished(run)
    finally:
        display.end()
    return runs, notes


def _run_one(
    cluster: KafkaCluster, options: BenchOptions, name: str, round_: int, notes: dict[str, str], display: Display
) -> Run:
    if name in notes:
        return Run(name, round_, {}, skipped=notes[name])
    try:
        return Run(name, round_, _measure(cluster, options, name, round_, display))
    except BenchError as e:
        if split_variant(name)[0] != SHARE or SHARE_UNAVAILABLE not in str(e):
            raise
        # A cluster without share groups: say so in the share rows (no more tries) and measure the others.
        note = f"skipped: {SHARE_UNAVAILABLE} on this cluster (KIP-932 needs Kafka 4.x with them enabled)"
        notes.update({other: note for other in options.measured if split_variant(other)[0] == SHARE})
        return Run(name, round_, {}, skipped=note)


def _measure(cluster: KafkaCluster, options: BenchOptions, name: str, round_: int, display: Display) -> dict[str, Any]:
    if split_variant(name)[0] in CONSUMERS:
        return run_consumer(cluster, options, name, round_, display)
    if name == TRACKER:
        return run_tracker(cluster, options, display)
    return run_http(cluster, options, display)
