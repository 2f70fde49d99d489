"""Settling one finished redelivery pass into its partition's state: forget what was ENDed, count, log, back off."""

from __future__ import annotations

import logging

from tracker.config import TrackerConfig
from tracker.metrics import TrackerMetrics
from tracker.partition import PartitionState
from tracker.redeliverer import Redelivered

_log = logging.getLogger(__name__)


def settle(
    config: TrackerConfig, metrics: TrackerMetrics, state: PartitionState, outcome: Redelivered, done_ms: int
) -> None:
    """Apply `outcome` (a pass over `state`'s due offsets that ended at `done_ms`) on the loop thread."""
    acked_ms = outcome.copied_at_ms or done_ms
    for deadline in state.done_all(outcome.copied + outcome.dead_lettered):
        if deadline is not None:
            metrics.lateness.observe(max(0, acked_ms - deadline) / 1000)
    state.done_all(outcome.missing + outcome.unwritable)
    metrics.redeliveries.inc(len(outcome.copied))
    metrics.dead_letters.inc(len(outcome.dead_lettered))
    metrics.missing.inc(len(outcome.missing))
    metrics.undeliverable_truncated.inc(len(outcome.truncated))
    metrics.undeliverable_unwritable.inc(len(outcome.unwritable))
    topic = config.kmq.queue_topic
    if outcome.dead_lettered:
        _log.info("dead-lettered %s[%d] offsets %s", topic, state.partition, outcome.dead_lettered)
    for failure in outcome.end_failures:
        metrics.redelivery_errors.inc()
        _log.warning("%s (the key may be redelivered again)", failure)
    if outcome.failed:
        retry_at = state.backoff.failed(done_ms)
        metrics.redelivery_errors.inc()
        _log.warning(
            "redelivery of %d messages of %s[%d] failed, retrying in %d ms: %s",
            len(outcome.failed),
            topic,
            state.partition,
            retry_at - done_ms,
            "; ".join(outcome.errors) or "not reached in time",
        )
    else:
        state.backoff.succeeded()
