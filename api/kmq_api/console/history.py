"""The overview's last hour: per queue, a sample every `interval_s` of its backlog and of the offsets that count its
traffic (the queue's end: messages written; the group's committed offsets: messages received; the dead-letter
topic's end: dead letters written) and, when tracker replicas are configured, of the totals of their counters
(deliveries settled: acknowledged; copies written back: redelivered; see `tracker_totals`). Rates per minute are the
differences between samples; a rate whose figure is unknown at either end is unknown (None), never 0.

Kept in memory, and one sample per queue and minute in a compacted topic (`HistoryStore`): a restarted facade reads
the last hour back from it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import anyio.to_thread
from confluent_kafka import Consumer, KafkaException, TopicPartition

from kmq.config import KmqConfig
from kmq.errors import KmqError
from kmq.kafka import consumer_settings
from kmq_api.console.sample import Sample
from kmq_api.console.tracker_totals import Round, TrackerTotals
from kmq_api.console.trackers import probe
from kmq_api.served import ServedQueue

if TYPE_CHECKING:
    from kmq_api.console.history_store import HistoryStore

_log = logging.getLogger(__name__)
HOUR_MS = 3600 * 1000


@dataclass(frozen=True, slots=True)
class Rates:
    """Per minute, between the two samples at either end of the last minute (or the nearest ones)."""

    written: float
    received: float
    dead_lettered: float
    acknowledged: float | None  # None: unknown (no tracker replica configured, or one did not answer)
    redelivered: float | None


class History:
    """Samples of every queue for the last hour; one writer (the `run` task), readers copy the deques.
    `tracker_urls`: the replicas whose counters give the acknowledged and redelivered figures (none: unknown)."""

    def __init__(
        self, interval_s: float = 10.0, store: HistoryStore | None = None, tracker_urls: tuple[str, ...] = ()
    ) -> None:
        self.interval_s = interval_s
        self.samples: dict[str, deque[Sample]] = {}
        self.store = store
        self.tracker_urls = tracker_urls
        self._saved_minute: dict[str, int] = {}
        self._totals = TrackerTotals()
        self._running: dict[str, tuple[float, float]] = {}  # per queue: acknowledged, redelivered so far

    async def run(self, queues: dict[str, ServedQueue]) -> None:
        """Read the last hour back, then sample every queue every `interval_s` for the app's lifetime. Kafka trouble
        skips a sample (logged); a store that cannot be opened leaves the history in memory only (logged)."""
        if self.store is not None:
            await self._restore(self.store)
        try:
            while True:
                counted = await self._count(queues)
                for name, queue in list(queues.items()):
                    try:
                        sample, partitions = await anyio.to_thread.run_sync(measure, queue)
                        if counted is not None and counted.whole(queue.config.markers_topic, partitions):
                            so_far = self._running[name]
                            sample = replace(sample, acknowledged=round(so_far[0]), redelivered=round(so_far[1]))
                        await self._save(name, sample)
                    except (KmqError, KafkaException) as e:
                        _log.warning("console: no sample of %s: %s", name, e)
                        continue
                    self.add(name, sample)
                await asyncio.sleep(self.interval_s)
        finally:
            if self.store is not None:
                await anyio.to_thread.run_sync(self.store.close)

    async def _count(self, queues: dict[str, ServedQueue]) -> Round | None:
        """Scrape the trackers once and add what they counted to each queue's totals; the round (None when no
        tracker is configured), which tells whose figures are whole."""
        if not self.tracker_urls:
            return None
        urls = self.tracker_urls
        replicas = await anyio.to_thread.run_sync(lambda: [probe(url) for url in urls])
        found = self._totals.observe(replicas)
        for name, queue in queues.items():
            settled, redelivered = found.of(queue.config.markers_topic)
            acknowledged_so_far, redelivered_so_far = self._running.get(name, (0.0, 0.0))
            self._running[name] = (acknowledged_so_far + settled, redelivered_so_far + redelivered)
        return found

    async def _restore(self, store: HistoryStore) -> None:
        since_ms = int(time.time() * 1000) - HOUR_MS
        try:
            await anyio.to_thread.run_sync(store.open)
            kept = await anyio.to_thread.run_sync(store.load, since_ms)
        except (KmqError, KafkaException) as e:
            _log.warning("console: history topic %s unusable, the history stays in memory: %s", store.topic, e)
            self.store = None
            return
        for queue, sample in kept:
            self.add(queue, sample)
            self._saved_minute[queue] = sample.at_ms // 60_000
            if sample.acknowledged is not None and sample.redelivered is not None:
                self._running[queue] = (float(sample.acknowledged), float(sample.redelivered))

    async def _save(self, queue: str, sample: Sample) -> None:
        """One sample per queue and minute goes to the store."""
        minute = sample.at_ms // 60_000
        if self.store is not None and self._saved_minute.get(queue) != minute:
            await anyio.to_thread.run_sync(self.store.save, queue, sample)
            self._saved_minute[queue] = minute

    def add(self, queue: str, sample: Sample) -> None:
        kept = self.samples.setdefault(queue, deque())
        kept.append(sample)
        while kept and kept[0].at_ms < sample.at_ms - HOUR_MS:
            kept.popleft()

    def of(self, queue: str) -> list[Sample]:
        return list(self.samples.get(queue, ()))

    def rates(self, queue: str) -> Rates | None:
        samples = self.of(queue)
        if len(samples) < 2:
            return None
        last = samples[-1]
        first = next((s for s in samples if s.at_ms >= last.at_ms - 60_000), samples[0])
        if first is last:
            first = samples[-2]
        minutes = max(1, last.at_ms - first.at_ms) / 60_000
        return Rates(
            (last.written - first.written) / minutes,
            (last.received - first.received) / minutes,
            (last.dead_lettered - first.dead_lettered) / minutes,
            _counted_rate(samples, "acknowledged"),
            _counted_rate(samples, "redelivered"),
        )


def _counted_rate(samples: list[Sample], figure: str) -> float | None:
    """Per minute over the last minute (or the nearest samples) of a figure that may be unknown: None when the last
    sample does not know it, or no earlier one does."""
    known = [(s.at_ms, value) for s in samples if (value := getattr(s, figure)) is not None]
    if len(known) < 2 or known[-1][0] != samples[-1].at_ms:
        return None
    last = known[-1]
    first = next((k for k in known if k[0] >= last[0] - 60_000), known[0])
    if first is last:
        first = known[-2]
    return float(last[1] - first[1]) / (max(1, last[0] - first[0]) / 60_000)


def measure(queue: ServedQueue) -> tuple[Sample, int]:
    """One sample of `queue`, and its number of partitions. Blocking: call from a thread."""
    lags = queue.backlog_probe.measure()
    at_ms = int(time.time() * 1000)
    received = sum(lag.committed_offset or 0 for lag in lags)
    written = sum(lag.end_offset for lag in lags)
    return Sample(at_ms, sum(lag.backlog for lag in lags), written, received, _end(queue.config)), len(lags)


def _end(config: KmqConfig) -> int:
    """The sum of the dead-letter topic's end offsets."""
    consumer = Consumer(consumer_settings(config, "kmq-console-history"))
    try:
        topic = config.dead_letter_topic
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        partitions = sorted(metadata.partitions) if metadata is not None and metadata.error is None else []
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
    finally:
        consumer.close()
