"""The trackers' counters of a queue as running totals: the acknowledged and redelivered rates of the overview.

Each replica counts, per markers partition it holds, the deliveries settled by an END (`kmq_settled_deliveries`) and
the copies it wrote back (`kmq_redelivered_messages`). A partition moves between replicas and a replica restarts from
0, so the totals are sums of increases, as Prometheus's `increase()` takes them: per replica and series, the
difference from the last scrape, or the whole value when it went down (the replica restarted) or the series is new on
a replica already known. A replica seen for the first time only sets its baseline: what it counted before is not
attributed to this moment.

A queue's figures of a round are whole when every partition of its markers topic is held by a replica that answered
and was known already: otherwise a partition's counts are missing (its replica did not answer, or only set its
baseline) and the history records "unknown" rather than a rate that is too low. What a replica that stops answering
counted since its last scrape is added when it answers again, and lost if it never does. Pure: the history's task is
the one caller (one writer)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kmq_api.console.trackers import REDELIVERED, SETTLED, Replica

_Series = tuple[str, str, str, int]  # replica URL, counter, markers topic, partition


@dataclass(frozen=True, slots=True)
class Round:
    """What one scrape of every replica found: the increases by (counter, markers topic), and the markers partitions
    held by replicas that answered and were known before (whose counts are all there)."""

    increases: dict[tuple[str, str], float]
    counted: dict[str, set[int]]  # markers topic -> partitions

    def of(self, markers_topic: str) -> tuple[float, float]:
        """(settled, redelivered) increases of one markers topic."""
        return self.increases.get((SETTLED, markers_topic), 0.0), self.increases.get((REDELIVERED, markers_topic), 0.0)

    def whole(self, markers_topic: str, partitions: int) -> bool:
        """Whether every one of the topic's `partitions` was counted this round."""
        return partitions > 0 and self.counted.get(markers_topic, set()) >= set(range(partitions))


class TrackerTotals:
    def __init__(self) -> None:
        self._last: dict[_Series, float] = {}
        self._known: set[str] = set()  # replicas that answered at least once

    def observe(self, replicas: Sequence[Replica]) -> Round:
        increases: dict[tuple[str, str], float] = {}
        counted: dict[str, set[int]] = {}
        for replica in replicas:
            if not replica.scraped:
                continue
            first = replica.url not in self._known
            self._known.add(replica.url)
            if not first:
                for topic, held in replica.held.items():
                    counted.setdefault(topic, set()).update(partition.partition for partition in held)
            for (counter, topic, partition), value in replica.counters.items():
                series = (replica.url, counter, topic, partition)
                last = self._last.get(series)
                self._last[series] = value
                if first:
                    continue
                increase = value if last is None or value < last else value - last
                increases[(counter, topic)] = increases.get((counter, topic), 0.0) + increase
        return Round(increases, counted)
