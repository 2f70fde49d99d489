"""Settling one finished redelivery pass into its partition's state: forget what was ENDed, count, log, back off."""

from __future__ import annotations

import logging

from kmq_tracker.config import TrackerConfig
from kmq_tracker.metrics import TrackerMetrics
from kmq_tracker.redeliverer import EndProbed
from kmq_tracker.workers import Finished

_log = logging.getLogger(__name__)


def settle(config: TrackerConfig, metrics: TrackerMetrics, finished: Finished) -> None:
    """Apply a finished pass to its partition's state, on the loop thread."""
    state, outcome, done_ms = finished.job.state, finished.outcome, finished.finished_ms
    if outcome is None:
        return
    written = outcome.copied + outcome.dead_lettered
    state.done_all(written)  # offsets the queue held: sane, often contiguous
    for offset in outcome.missing + outcome.no_record + outcome.unwritable:  # anything a garbage START named: 1 by 1
        state.done(offset)
    # Lateness is judged by the deadlines the pass began with: the pass's ENDs may have been read back already.
    deadlines = dict(zip(finished.job.offsets, finished.job.deadlines, strict=True))
    acked_ms = outcome.copied_at_ms or done_ms
    for offset in written:
        deadline = deadlines.get(offset)
        if deadline is not None:
            metrics.lateness.observe(max(0, acked_ms - deadline) / 1000)
    metrics.redeliveries.inc(len(outcome.copied))
    metrics.redelivered.labels(config.kmq.markers_topic, str(state.partition)).inc(len(outcome.copied))
    metrics.dead_letters.inc(len(outcome.dead_lettered))
    metrics.missing.inc(len(outcome.missing))
    metrics.no_record.inc(len(outcome.no_record))
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
    if outcome.unconfirmed is not None:
        _unconfirmed(config, metrics, finished, outcome.unconfirmed)


def _unconfirmed(config: TrackerConfig, metrics: TrackerMetrics, finished: Finished, probe: EndProbed) -> None:
    """Offsets only the partition's cached end had vouched for wait: until reading reaches the end the probe found
    (its send time is then read through), or, when it got no answer, for a backoff."""
    state, topic = finished.job.state, config.kmq.markers_topic
    metrics.unconfirmed_passes.inc()
    if probe.end is not None:
        state.await_end(probe.end, probe.sent_ms)
        _log.debug(
            "%d due messages of %s[%d] wait for the markers up to %d (read up to %d): their ENDs may be there",
            probe.waiting, config.kmq.queue_topic, state.partition, probe.end, probe.position,
        )  # fmt: skip
        return
    retry_at = state.backoff.failed(finished.finished_ms)
    _log.info(
        "%d due messages of %s[%d] wait %d ms: the end of %s[%d] could not be fetched (their ENDs may be there)",
        probe.waiting, config.kmq.queue_topic, state.partition, retry_at - finished.finished_ms, topic, state.partition,
    )  # fmt: skip
