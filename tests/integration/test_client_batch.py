"""The client with `marker_format="batch"` against the broker: the markers topic is read back and decoded."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from kmq.batch_markers import BatchEnd, BatchStart, decode_batch_marker, offsets_in, runs_of
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.markers import MarkerKey, StartMarker, decode_marker
from tests.helpers import Record, committed_offsets, read_topic, wait_for
from tests.integration.test_client import receive_all, send, spy_commits

MakeConfig = Callable[..., KmqConfig]


def decoded(config: KmqConfig, partitions: int = 4) -> list[tuple[int, object]]:
    """(markers partition, decoded marker) for every record on the markers topic, in order per partition."""
    out: list[tuple[int, object]] = []
    for record in read_topic(config, config.markers_topic, partitions):
        key = MarkerKey.decode(record.key)
        assert key.partition == record.partition
        value = record.value or b""
        marker = decode_batch_marker(key.offset, value) if value[:1] in (b"\x02", b"\x03") else decode_marker(value)
        out.append((record.partition, marker))
    return out


def ended(config: KmqConfig, partitions: int = 4) -> set[tuple[int, int]]:
    return {(p, o) for p, m in decoded(config, partitions) if isinstance(m, BatchEnd) for o in offsets_in(m.runs)}


@pytest.mark.parametrize("transactional", [False, True])
def test_one_batch_start_per_partition_is_durable_before_the_commit(
    make_config: MakeConfig, transactional: bool
) -> None:
    config = make_config(msg_timeout_ms=4321, marker_format="batch", transactional=transactional)
    send(config, 40)
    with KmqClient(config) as client:
        spy = spy_commits(client, config)
        received = receive_all(client, 40)
        client.flush()  # (pipelined: waits for the STARTs in flight, then commits what they allow)
        starts = [(p, m) for p, m in decoded(config) if isinstance(m, BatchStart)]
        if not transactional:  # the transactional commit does not go through the consumer
            assert spy.markers_at_commit and all(spy.markers_at_commit)
        assert {m.redeliver_after_ms for _, m in starts} == {4321}
        started = {(p, o) for p, m in starts for o in offsets_in(m.runs)}
        assert started == {(m.partition, m.offset) for m in received}
        batches = len({(m.partition, m.deadline_ms) for m in received})
        assert len(starts) <= batches  # one record per partition per batch, not one per message
        assert committed_offsets(config, 4) == {
            p: max(m.offset for m in received if m.partition == p) + 1 for p in {m.partition for m in received}
        }


def test_acks_become_batch_ends_within_end_flush_ms_while_the_app_blocks(make_config: MakeConfig) -> None:
    config = make_config(marker_format="batch", end_flush_ms=300)
    send(config, 30, partition=1)
    client = KmqClient(config)
    try:
        received = receive_all(client, 30)
        for msg in received[:10]:
            client.processed(msg)
        client.processed_many(received[10:20])
        acked_at = time.monotonic()
        # The application now does nothing with the client: the background writer must still write the ENDs.
        wait_for(lambda: len(ended(config)) == 20, 10, what="20 acks as BATCH ENDs")
        assert time.monotonic() - acked_at < 5  # generous: the deadline itself is shown by the unit test
        ends = [m for _, m in decoded(config) if isinstance(m, BatchEnd)]
        assert len(ends) <= 3  # a writer round may fall between two processed() calls, not more often
        assert ended(config) == {(m.partition, m.offset) for m in received[:20]}
    finally:
        client.close()
    assert ended(config) == {(m.partition, m.offset) for m in received[:20]}


def test_close_writes_every_gathered_ack_and_nack_stays_a_kmq_start(make_config: MakeConfig) -> None:
    config = make_config(marker_format="batch", end_flush_ms=60_000)
    send(config, 12)
    with KmqClient(config) as client:
        received = receive_all(client, 12)
        client.nack(received[0], 0)
        client.extend(received[1], 5_000)
        client.processed_many(received[2:])
        assert not ended(config)  # an hour-long flush interval: nothing written before close()
    assert ended(config) == {(m.partition, m.offset) for m in received[2:]}
    singles = [(p, m) for p, m in decoded(config) if isinstance(m, StartMarker)]
    assert sorted(m.redeliver_after_ms for _, m in singles) == [0, 5_000]


def test_records_are_the_protocol_bytes(make_config: MakeConfig) -> None:
    config = make_config(marker_format="batch", msg_timeout_ms=1000)
    send(config, 5, partition=2)
    with KmqClient(config) as client:
        received = receive_all(client, 5)
        client.processed_many(received)
    records: list[Record] = read_topic(config, config.markers_topic, 4)
    base = min(m.offset for m in received)
    key = MarkerKey(2, base).encode()
    assert [(r.partition, r.key, r.value) for r in records] == [
        (2, key, BatchStart(1000, runs_of(range(base, base + 5))).encode()),
        (2, key, BatchEnd(((base, 5),)).encode()),
    ]
