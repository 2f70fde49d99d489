"""The tracker replicas, as the overview shows them: each one's health (`/healthz`) and, from its `/metrics`, the
markers partitions it holds with their pending STARTs and how overdue the earliest one is, and its counters of
settled deliveries and redelivered copies per markers partition (the acknowledged and redelivered rates).

Blocking (HTTP with a short timeout): call from a thread."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

TIMEOUT_S = 2.0
_PENDING = "kmq_pending_messages"
_OVERDUE = "kmq_oldest_pending_age_seconds"
SETTLED = "kmq_settled_deliveries_total"
REDELIVERED = "kmq_redelivered_messages_total"


@dataclass(frozen=True, slots=True)
class HeldPartition:
    partition: int
    pending: int
    overdue_s: float  # how long the earliest pending deadline has passed (0: none is due)


@dataclass
class Replica:
    url: str
    healthy: bool
    detail: str  # why not healthy, or ""
    held: dict[str, list[HeldPartition]] = field(default_factory=dict)  # by markers topic
    # (counter, markers topic, partition) -> value, for SETTLED and REDELIVERED
    counters: dict[tuple[str, str, int], float] = field(default_factory=dict)
    scraped: bool = False  # its /metrics answered

    def of(self, markers_topic: str) -> list[HeldPartition]:
        return self.held.get(markers_topic, [])


def probe(url: str) -> Replica:
    """One replica's health and partitions; an unreachable one is unhealthy and says why."""
    base = url.rstrip("/")
    try:
        status, _ = _get(f"{base}/healthz")
        _, metrics = _get(f"{base}/metrics")
    except (OSError, urllib.error.URLError) as e:
        return Replica(url, False, f"unreachable: {e}")
    replica = Replica(url, status == 200, "" if status == 200 else f"/healthz answered {status}")
    try:
        replica.held = _held(metrics)
        replica.counters = counters(metrics)
    except ValueError as e:  # not Prometheus's text format: not a tracker, or a broken answer
        return Replica(url, False, f"/metrics unreadable: {e}")
    replica.scraped = bool(metrics)
    return replica


def counters(metrics: str) -> dict[tuple[str, str, int], float]:
    """The SETTLED and REDELIVERED samples of a `/metrics` text, by counter, markers topic and partition."""
    found: dict[tuple[str, str, int], float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name in (SETTLED, REDELIVERED):
                where = (sample.labels.get("topic", ""), int(sample.labels.get("partition", "0")))
                found[(sample.name, *where)] = sample.value
    return found


def _held(metrics: str) -> dict[str, list[HeldPartition]]:
    pending: dict[tuple[str, int], float] = {}
    overdue: dict[tuple[str, int], float] = {}
    for family in text_string_to_metric_families(metrics):
        if family.name not in (_PENDING, _OVERDUE):
            continue
        for sample in family.samples:
            where = (sample.labels.get("topic", ""), int(sample.labels.get("partition", "0")))
            (pending if family.name == _PENDING else overdue)[where] = sample.value
    held: dict[str, list[HeldPartition]] = {}
    for (topic, partition), count in sorted(pending.items()):
        held.setdefault(topic, []).append(HeldPartition(partition, int(count), overdue.get((topic, partition), 0.0)))
    return held


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            return int(answer.status), answer.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return int(e.code), ""
