"""The overview's acknowledged and redelivered rates: the trackers' counters read from their /metrics text, summed
as increases over replicas and partitions, and rates that say "unknown" rather than 0. No broker, no browser."""

from __future__ import annotations

import http.server
import json
import threading
from dataclasses import asdict
from typing import Any

from kmq_api.console.history import History
from kmq_api.console.history_store import _decode
from kmq_api.console.sample import Sample
from kmq_api.console.tracker_totals import TrackerTotals
from kmq_api.console.trackers import REDELIVERED, SETTLED, HeldPartition, Replica, counters, probe
from kmq_tracker.metrics import TrackerMetrics

M = "orders__markers"


def replica(url: str, settled: dict[int, float], redelivered: dict[int, float] | None = None) -> Replica:
    """A replica that answered, holding the partitions it has a settled count of."""
    found = Replica(url, True, "", scraped=True)
    found.held = {M: [HeldPartition(p, 0, 0.0) for p in sorted(settled)]} if settled else {}
    found.counters = {(SETTLED, M, p): v for p, v in settled.items()}
    found.counters.update({(REDELIVERED, M, p): v for p, v in (redelivered or {}).items()})
    return found


def unreachable(url: str) -> Replica:
    return Replica(url, False, "unreachable: refused")


def test_the_counters_are_read_per_markers_partition_from_a_trackers_metrics() -> None:
    metrics = TrackerMetrics()
    metrics.set_partition(M, 0, pending=1, overdue_ms=0, caught_up=True, settled=5)
    metrics.set_partition(M, 1, pending=0, overdue_ms=0, caught_up=True, settled=2)
    metrics.redelivered.labels(M, "1").inc(3)
    metrics.redeliveries.inc(3)  # the unlabelled total is not read twice
    assert counters(metrics.render().decode()) == {
        (SETTLED, M, 0): 5.0,
        (SETTLED, M, 1): 2.0,
        (REDELIVERED, M, 0): 0.0,
        (REDELIVERED, M, 1): 3.0,
    }


def test_totals_survive_restarts_and_moves_and_a_replica_seen_first_only_sets_its_baseline() -> None:
    totals = TrackerTotals()
    # a replica seen for the first time: what it counted before is not this round's, and the round is not whole
    first = totals.observe([replica("a", {0: 100, 1: 50}, {0: 7}), unreachable("never-answers")])
    assert first.of(M) == (0.0, 0.0) and not first.whole(M, 2)
    # then it counts on: the increases; a replica that never answered and holds nothing does not matter
    second = totals.observe([replica("a", {0: 110, 1: 55}, {0: 9}), unreachable("never-answers")])
    assert second.of(M) == (15.0, 2.0) and second.whole(M, 2)
    assert not second.whole(M, 3), "a partition nobody holds is not counted"
    # partition 1 moves to replica b, already known: the new series counts from 0 there
    b = Replica("b", True, "", scraped=True)
    totals.observe([replica("a", {0: 110, 1: 55}), b])
    moved = totals.observe([replica("a", {0: 111}), replica("b", {1: 4})])
    assert moved.of(M) == (5.0, 0.0) and moved.whole(M, 2)
    # a restarted replica starts from 0 again: its new value is the increase
    restarted = totals.observe([replica("a", {0: 3}), replica("b", {1: 4})])
    assert restarted.of(M) == (3.0, 0.0) and restarted.whole(M, 2)
    # a replica holding a partition does not answer: not whole; what it counted meanwhile comes when it answers
    gone = totals.observe([unreachable("a"), replica("b", {1: 6})])
    assert gone.of(M) == (2.0, 0.0) and not gone.whole(M, 2)
    back = totals.observe([replica("a", {0: 8}), replica("b", {1: 6})])
    assert back.of(M) == (5.0, 0.0) and back.whole(M, 2)
    assert back.of("other__markers") == (0.0, 0.0) and not back.whole("other__markers", 1)


def sample(at_s: int, acknowledged: int | None, redelivered: int | None = 0) -> Sample:
    return Sample(at_s * 1000, 0, at_s, at_s, 0, acknowledged, redelivered)


def test_a_rate_is_unknown_unless_both_ends_know_the_figure() -> None:
    history = History()
    for s in (sample(0, None, None), sample(10, None, None)):
        history.add("q", s)
    rates = history.rates("q")
    assert rates is not None and rates.written == 60 and rates.acknowledged is None and rates.redelivered is None
    history.add("q", sample(20, 100))
    rates = history.rates("q")
    assert rates is not None and rates.acknowledged is None, "one sample knowing it makes no rate"
    history.add("q", sample(30, 130, 5))
    rates = history.rates("q")
    assert rates is not None and rates.acknowledged == 180 and rates.redelivered == 30
    history.add("q", sample(40, None))  # a replica did not answer: the rate now is not known
    rates = history.rates("q")
    assert rates is not None and rates.acknowledged is None and rates.written == 60


def test_the_history_topic_keeps_the_figures_and_reads_older_records_without_them() -> None:
    kept = sample(60, 42, 3)
    assert _decode(json.dumps({"queue": "q", **asdict(kept)}).encode()) == ("q", kept)
    older = {"queue": "q", "at_ms": 1, "backlog": 2, "written": 3, "received": 4, "dead_lettered": 5}
    assert _decode(json.dumps(older).encode()) == ("q", Sample(1, 2, 3, 4, 5, None, None))
    assert _decode(json.dumps({"queue": "q", "at_ms": 1}).encode()) is None


class _NotATracker(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server's name for it
        body = b"<html><body>not Prometheus</body></html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_replica_whose_metrics_do_not_parse_is_unhealthy_and_counts_nothing() -> None:
    """(The history's task would otherwise die of it, and take the facade down.)"""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotATracker)
    thread = threading.Thread(target=server.serve_forever, name="not-a-tracker", daemon=True)
    thread.start()
    try:
        found = probe(f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert not found.healthy and found.detail.startswith("/metrics unreadable") and not found.scraped
    assert TrackerTotals().observe([found]).counted == {}
