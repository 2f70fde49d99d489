"""The overview's last hour: per queue, a sample every `interval_s` of its backlog and of the offsets that count its
traffic (the queue's end: messages written; the group's committed offsets: messages received; the dead-letter
topic's end: dead letters written). Rates per minute are the differences between samples.

Kept in memory, and one sample per queue and minute in a compacted topic (`HistoryStore`): a restarted facade reads
the last hour back from it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio.to_thread
from confluent_kafka import Consumer, KafkaException, TopicPartition

from kmq.config import KmqConfig
from kmq.errors import KmqError
from kmq.kafka import consumer_settings
from kmq_api.console.sample import Sample
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


class History:
    """Samples of every queue for the last hour; one writer (the `run` task), readers copy the deques."""

    def __init__(self, interval_s: float = 10.0, store: HistoryStore | None = None) -> None:
        self.interval_s = interval_s
        self.samples: dict[str, deque[Sample]] = {}
        self.store = store
        self._saved_minute: dict[str, int] = {}

    async def run(self, queues: dict[str, ServedQueue]) -> None:
        """Read the last hour back, then sample every queue every `interval_s` for the app's lifetime. Kafka trouble
        skips a sample (logged); a store that cannot be opened leaves the history in memory only (logged)."""
        if self.store is not None:
            await self._restore(self.store)
        try:
            while True:
                for name, queue in list(queues.items()):
                    try:
                        sample = await anyio.to_thread.run_sync(measure, queue)
                        await self._save(name, sample)
                    except (KmqError, KafkaException) as e:
                        _log.warning("console: no sample of %s: %s", name, e)
                        continue
                    self.add(name, sample)
                await asyncio.sleep(self.interval_s)
        finally:
            if self.store is not None:
                await anyio.to_thread.run_sync(self.store.close)

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
        )


def measure(queue: ServedQueue) -> Sample:
    """One sample of `queue`. Blocking: call from a thread."""
    lags = queue.backlog_probe.measure()
    at_ms = int(time.time() * 1000)
    received = sum(lag.committed_offset or 0 for lag in lags)
    written = sum(lag.end_offset for lag in lags)
    return Sample(at_ms, sum(lag.backlog for lag in lags), written, received, _end(queue.config))


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
