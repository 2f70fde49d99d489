"""The tracker's lag guard on a real broker: a pass that only the markers partition's cached end vouches for asks the
end afresh, and does not copy what only that end vouched for while markers lie past what was read (an END there,
unread, may settle it)."""

from __future__ import annotations

from confluent_kafka import Producer

from kmq.config import KmqConfig
from kmq.kafka import producer_settings
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq.producer import KmqProducer, OutgoingMessage
from kmq_tracker.config import TrackerConfig
from kmq_tracker.metrics import TrackerMetrics
from kmq_tracker.pacing import Backoff
from kmq_tracker.partition import PartitionState
from kmq_tracker.redeliverer import Redeliverer
from kmq_tracker.settle import settle
from kmq_tracker.workers import RedeliveryPool
from tests.conftest import MakeConfig
from tests.helpers import read_topic, wait_for


def one_message(make_config: MakeConfig, *markers: bytes) -> tuple[KmqConfig, bytes]:
    """A one-partition queue holding one message, `markers` for it on the markers topic; the config and the
    markers' key."""
    config = make_config(partitions=1)
    with KmqProducer(config) as producer:
        producer.send_batch([OutgoingMessage(b"m0", partition=0)])
    producer_ = Producer(producer_settings(config))
    key = MarkerKey(0, 0).encode()
    for value in markers:
        producer_.produce(config.markers_topic, value, key, partition=0)
    assert producer_.flush(30) == 0
    return config, key


def test_a_pass_due_only_by_a_stale_end_waits_for_the_markers_past_it(make_config: MakeConfig) -> None:
    # given a queue message, its START (timeout 1 ms) and then its END on the markers topic
    config, key = one_message(make_config, StartMarker(1).encode(), EndMarker().encode())
    # and a tracker's state that read the START only, and whose consumer's cached end says it is at the end (as it
    # stays while the leader does not answer)
    tracker = TrackerConfig(kmq=config, http_enabled=False, read_timeout_ms=10_000)
    state = PartitionState(config.markers_topic, 0, Backoff(tracker.retry_backoff_ms, tracker.retry_backoff_max_ms))
    state.reached_end(0)
    state.apply(0, 1_000, key, StartMarker(1).encode())
    state.observe_position(high_watermark=1)
    assert state.due(2**40, 10) == [0]
    metrics = TrackerMetrics()
    pool = RedeliveryPool(tracker, 1)
    try:
        # when a pass is run for it
        pool.submit(state, [0])
        finished = pool.wait_for([0])
        # then it copies nothing: a fresh fetch finds the END's offset past the position read
        probes = [f.outcome.unconfirmed for f in finished if f.outcome]
        assert [(p.position, p.end, p.waiting) for p in probes if p] == [(1, 2, 1)]
        for done in finished:
            settle(tracker, metrics, done)
        assert metrics.registry.get_sample_value("kmq_redelivery_passes_unconfirmed_total") == 1
        assert len(state.pending) == 1 and state.due(2**40, 10) == []  # until the markers up to 2 are read
        assert [r.value for r in read_topic(config, config.queue_topic, 1)] == [b"m0"]
        # and once the END is read, the message is settled and nothing is due
        state.apply(1, 1_001, key, EndMarker().encode())
        assert len(state.pending) == 0 and state.awaited is None
    finally:
        pool.close()


def test_a_pass_whose_end_is_confirmed_copies(make_config: MakeConfig) -> None:
    # given a START read to the end of its markers partition, its deadline past every marker read
    config, _ = one_message(make_config, StartMarker(1).encode())
    tracker = TrackerConfig(kmq=config, http_enabled=False, read_timeout_ms=10_000)
    redeliverer = Redeliverer(tracker)
    try:
        # when the end is asked afresh, then a fetch sent now finds it
        assert redeliverer.markers_end(0, 1) == 1
        assert redeliverer.markers_end(0, 0) == 1
        # and the pass then copies the message
        outcome = redeliverer.redeliver(0, [0])
        assert outcome.copied == [0]
        wait_for(lambda: len(read_topic(config, config.queue_topic, 1)) == 2, 30, what="the copy in the queue")
    finally:
        redeliverer.close()
