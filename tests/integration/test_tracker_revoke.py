"""On revocation a replica flushes its redelivery writes before giving the partition up (issue 15, item 5): the next
owner finds the ENDs of what was already copied, and copies nothing a second time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.producer import KmqProducer, OutgoingMessage
from tests.helpers import read_topic, wait_for
from tests.integration.marker_formats import marked_offsets
from tests.integration.test_tracker_e2e import receive, running_tracker

MakeConfig = Callable[..., KmqConfig]
PARTITIONS = 2
SHORT = 3  # per partition, redelivered at once
LINGER_MS = 15_000  # the first replica's ENDs wait this long in its producer unless flushed


def test_a_revoked_partitions_copies_are_not_copied_again_by_the_next_owner(make_config: MakeConfig) -> None:
    config = make_config(partitions=PARTITIONS, msg_timeout_ms=300)
    with KmqProducer(config) as producer, KmqClient(config) as client:
        # a START that stays pending (it holds the committed offset back), then STARTs due at once
        producer.send_batch(OutgoingMessage(b"held", partition=p) for p in range(PARTITIONS))
        receive(client, PARTITIONS, msg_timeout_ms=600_000)
        producer.send_batch(
            OutgoingMessage(f"s{i}".encode(), partition=p) for p in range(PARTITIONS) for i in range(SHORT)
        )
        receive(client, PARTITIONS * SHORT)
    lingering = config.with_overrides(kafka_config={**config.kafka_config, "linger.ms": LINGER_MS})
    originals = PARTITIONS * (1 + SHORT)
    with running_tracker(lingering, commit_interval_ms=100) as first:
        wait_for(
            lambda: len(read_topic(config, config.queue_topic, PARTITIONS)) == originals + PARTITIONS * SHORT,
            what="the first replica's copies",
        )
        with running_tracker(config) as second:  # joins: one partition moves from the first replica to it
            wait_for(lambda: first.partitions() and second.partitions(), what="the partitions split")
            wait_for(lambda: _ends(config) >= PARTITIONS * SHORT, timeout_s=LINGER_MS / 1000 + 10, what="ENDs")
            wait_for(
                lambda: all(s.pending == 1 for s in [*first.partitions().values(), *second.partitions().values()]),
                what="only the held messages pending",
            )
            copies = Counter(r.value for r in read_topic(config, config.queue_topic, PARTITIONS))
    assert copies == Counter({b"held": PARTITIONS, **{f"s{i}".encode(): 2 * PARTITIONS for i in range(SHORT)}})


def _ends(config: KmqConfig) -> int:
    """Queue offsets ENDed (a kmq END each, or within a BATCH END)."""
    return len(marked_offsets(read_topic(config, config.markers_topic, PARTITIONS))[1])
