"""The tracker's queue reader on a real broker: point reads never wait out the user's long fetch waits."""

from __future__ import annotations

from kmq.producer import KmqProducer, OutgoingMessage
from kmq_tracker.config import TrackerConfig
from kmq_tracker.reader import QueueReader
from tests.conftest import MakeConfig


def test_reads_of_separate_runs_do_not_wait_for_the_fetch_parked_at_the_end(make_config: MakeConfig) -> None:
    # given workers whose consumers long-poll (a fetch waits up to 30 s for data) and a 5 s read timeout
    config = make_config(partitions=1, consumer_kafka_config={"fetch.wait.max.ms": 30_000})
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(f"m{i}".encode(), partition=0) for i in range(2000))
    reader = QueueReader(TrackerConfig(kmq=config, http_enabled=False, read_timeout_ms=5000))
    try:
        for first in (0, 1000, 1999, 10):
            # when runs far apart are read, each re-assigning the partition while a fetch sits at its end
            result = reader.read(0, [first, 1999])
            # then every one is found within the timeout (a parked 30 s fetch would leave them unread)
            assert (sorted(r.offset for r in result.found), result.unread) == (sorted({first, 1999}), []), result
    finally:
        reader.close()
