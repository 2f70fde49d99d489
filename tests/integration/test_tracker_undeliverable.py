"""A copy the producer refuses for good (issue 15, item 1): dead-lettered as `undeliverable: <error>` (its value
truncated when the dead-letter topic refuses it too), ENDed, and its neighbours copied exactly once."""

from __future__ import annotations

from collections.abc import Callable

from kmq import headers as h
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.producer import KmqProducer, OutgoingMessage
from tests.helpers import read_topic, tracker_settled, wait_for
from tests.integration.marker_formats import marked_offsets
from tests.integration.test_tracker_e2e import receive, running_tracker

MakeConfig = Callable[..., KmqConfig]
LIMIT = 2000  # the tracker producer's message.max.bytes: the big message fits, its copy with kmq's headers does not
BIG = b"x" * (LIMIT - 20)


def test_a_copy_refused_for_good_is_dead_lettered_and_its_neighbours_are_copied_once(make_config: MakeConfig) -> None:
    config = make_config(partitions=1, msg_timeout_ms=300)
    with KmqProducer(config) as producer:
        producer.send_batch([OutgoingMessage(b"a"), OutgoingMessage(BIG), OutgoingMessage(b"c")])
    with KmqClient(config) as client:
        assert len(receive(client, 3)) == 3  # STARTs written, never acknowledged
    tracker_kmq = config.with_overrides(kafka_config={**config.kafka_config, "message.max.bytes": LIMIT})
    with running_tracker(tracker_kmq) as service:
        wait_for(lambda: len(read_topic(config, config.dead_letter_topic, 1)) == 1, what="the dead letter")
        wait_for(lambda: len(marked_offsets(read_topic(config, config.markers_topic, 1))[1]) >= 3, what="ENDs")
        wait_for(lambda: tracker_settled(service), what="nothing pending")
        truncated = service.metrics.value("kmq_undeliverable_truncated_total")
    queue = read_topic(config, config.queue_topic, 1)
    assert sorted(r.value or b"" for r in queue) == sorted([b"a", b"a", BIG, b"c", b"c"])  # one copy each, once
    [dead] = read_topic(config, config.dead_letter_topic, 1)
    found = dict(dead.headers)
    assert (found[h.DLQ_REASON] or b"").startswith(b"undeliverable: ")
    assert found[h.DLQ_TRUNCATED] == str(len(BIG)).encode()  # the dead letter was too large as well
    assert dead.value == BIG[:1024] and truncated == 1
