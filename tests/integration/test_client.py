"""The client flow of PROTOCOL.md against a real broker: tansu and librdkafka's mock cluster."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kmq import headers as h
from kmq._transactional import TransactionalStarts as Transactions
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.errors import ClientClosedError, MarkerWriteError, TopicMismatchError
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq.message import Message
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.start_pipeline import StartPipeline
from kmq.starts import PipelinedStarts, SyncStarts, TransactionalStarts
from tests.helpers import Record, committed_offsets, read_committed_keys, read_topic
from tests.integration.marker_formats import with_marker_format

MakeConfig = Callable[..., KmqConfig]


@pytest.fixture(params=["kafka", "kafka_tansu", "kafka_mock"])
def cluster(request: pytest.FixtureRequest) -> Any:
    """Every test here runs on both embedded backends (or once on an external cluster)."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def make_config(make_config: MakeConfig) -> MakeConfig:
    """The kmq format's bytes, record by record (tests/integration/test_client_batch.py has the batch format's)."""
    return with_marker_format(make_config, "kmq")


def send(config: KmqConfig, count: int, partition: int | None = None) -> None:
    with KmqProducer(config, check=False) as producer:
        batch = [
            OutgoingMessage(f"m{i}".encode(), f"k{i}".encode(), [("trace", b"t")], partition) for i in range(count)
        ]
        producer.send_batch(batch)


def receive_all(client: KmqClient, count: int, msg_timeout_ms: int | None = None) -> list[Message]:
    received: list[Message] = []
    for _ in range(200):
        received += client.receive(max_messages=count - len(received), timeout_s=0.2, msg_timeout_ms=msg_timeout_ms)
        if len(received) >= count:
            return received
    raise AssertionError(f"received {len(received)} of {count} messages")


def receive_until_error(client: KmqClient, count: int) -> list[Message]:
    """Receive until `receive()` raises (MarkerWriteError): at once in the synchronous order, one `receive()` after
    the failed batch with pipelined STARTs. The messages handed over before it are returned, as the exception's
    `received`."""
    received: list[Message] = []
    for _ in range(200):
        try:
            received += client.receive(max_messages=count, timeout_s=0.2)
        except MarkerWriteError as e:
            e.received = received  # type: ignore[attr-defined]  # for the test to inspect
            raise
    raise AssertionError(f"no receive() failed; {len(received)} messages received")


def spy_commits(client: KmqClient, config: KmqConfig) -> SpyConsumer:
    """Every offset commit of the client, the synchronous one in `receive()` or a pipeline's, goes through the spy."""
    spy = SpyConsumer(client._consumer, config)
    client._consumer = spy  # type: ignore[assignment]  # duck-typed
    starts = client._starts
    if isinstance(starts, PipelinedStarts):
        starts.pipeline._consumer = spy  # type: ignore[assignment]
    elif isinstance(starts, SyncStarts):
        starts._consumer = spy  # type: ignore[assignment]
    return spy


def pipeline_of(client: KmqClient) -> StartPipeline:
    """The START pipeline of a pipelined client."""
    starts = client._starts
    assert isinstance(starts, PipelinedStarts), "the client is not pipelined"
    return starts.pipeline


def transactions_of(client: KmqClient) -> Transactions:
    """The transactional STARTs of a transactional client."""
    starts = client._starts
    assert isinstance(starts, TransactionalStarts), "the client is not transactional"
    return starts.transactions


def markers(config: KmqConfig, partitions: int = 4) -> list[Record]:
    return read_topic(config, config.markers_topic, partitions)


def marker_values(config: KmqConfig, key: MarkerKey) -> list[bytes | None]:
    return [r.value for r in markers(config) if r.key == key.encode()]


class SpyConsumer:
    """Delegates to the real consumer, reading the markers topic at the moment of each commit."""

    def __init__(self, consumer: Any, config: KmqConfig) -> None:
        self._consumer, self._config = consumer, config
        self.markers_at_commit: list[list[Record]] = []

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        self.markers_at_commit.append(markers(self._config))
        return self._consumer.commit(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


@pytest.mark.parametrize("pipelined", [True, False], ids=["pipelined", "synchronous"])
def test_start_markers_are_durable_before_the_commit(make_config: MakeConfig, pipelined: bool) -> None:
    config = make_config(msg_timeout_ms=4321, pipelined=pipelined)
    send(config, 20)
    with KmqClient(config) as client:
        spy = spy_commits(client, config)
        received = receive_all(client, 20)
        client.flush()  # (pipelined: waits for the STARTs in flight, then commits what they allow)
        assert spy.markers_at_commit and all(at_commit for at_commit in spy.markers_at_commit)
        expected = {(m.partition, MarkerKey(m.partition, m.offset).encode()) for m in received}
        for at_commit in spy.markers_at_commit:
            assert {r.value for r in at_commit} == {StartMarker(4321).encode()}
        on_topic = markers(config)
        assert {(r.partition, r.key) for r in on_topic} == expected
        assert all(r.value == bytes.fromhex("01") + (4321).to_bytes(8, "big") for r in on_topic)
    committed = committed_offsets(config, 4)
    for partition in {m.partition for m in received}:
        assert committed[partition] == max(m.offset for m in received if m.partition == partition) + 1


def test_messages_carry_payload_headers_count_and_deadline(make_config: MakeConfig) -> None:
    config = make_config(msg_timeout_ms=10_000)
    send(config, 3)
    with KmqClient(config) as client:
        received = sorted(receive_all(client, 3), key=lambda m: m.value or b"")
    assert [m.value for m in received] == [b"m0", b"m1", b"m2"]
    assert [m.key for m in received] == [b"k0", b"k1", b"k2"]
    assert all(m.headers == (("trace", b"t"),) and m.redelivery_count == 0 for m in received)
    assert all(m.topic == config.queue_topic and m.timestamp_ms > 0 for m in received)
    assert all(9_000 < m.deadline_ms - m.timestamp_ms < 60_000 for m in received)


def test_a_received_message_is_sent_on_as_it_is_headers_and_all(make_config: MakeConfig) -> None:
    """`Message.headers` is a tuple, which confluent-kafka's produce() refuses: the producer takes any sequence."""
    config = make_config()
    send(config, 2)
    onward = make_config()
    with KmqClient(config) as client:
        received = receive_all(client, 2)
        with KmqProducer(onward) as producer:
            for msg in received:
                producer.send(msg.value, msg.key, msg.headers)
            producer.flush()
        client.processed_many(received)
    forwarded = read_topic(onward, onward.queue_topic, 4)
    assert sorted((r.value, r.key, tuple(r.headers)) for r in forwarded) == sorted(
        (m.value, m.key, m.headers) for m in received
    )


def test_send_takes_headers_as_a_mapping_or_as_pairs(make_config: MakeConfig) -> None:
    config = make_config()
    with KmqProducer(config) as producer:
        producer.send(b"v", key=b"k", headers={"trace": b"t1", "empty": None})
        producer.send(b"w", key=b"k", headers=(("trace", b"t2"), ("trace", b"t3")))
        producer.send_batch([OutgoingMessage(b"x", b"k", {"trace": b"t4"})])
    records = read_topic(config, config.queue_topic, 4)
    assert sorted((r.value, tuple(r.headers)) for r in records) == [
        (b"v", (("trace", b"t1"), ("empty", None))),
        (b"w", (("trace", b"t2"), ("trace", b"t3"))),
        (b"x", (("trace", b"t4"),)),
    ]


def test_a_failed_marker_write_commits_nothing_and_raises(cluster: Any) -> None:
    # The markers topic has one partition: START markers for queue partition 1 cannot be written.
    queue = f"t-misaligned-{uuid.uuid4().hex[:8]}"
    config = cluster.config(queue)
    cluster.create_topics({config.queue_topic: 2, config.markers_topic: 1, config.dead_letter_topic: 1})
    send(config, 5, partition=1)
    client = KmqClient(config, check=False, marker_timeout_s=10)
    try:
        with pytest.raises(MarkerWriteError, match=config.markers_topic):
            receive_until_error(client, 5)
        assert committed_offsets(config, 2)[1] < 0
        # The batch was rewound: it is delivered again, not skipped.
        with pytest.raises(MarkerWriteError) as again:
            receive_until_error(client, 5)
        assert (again.value.partition, again.value.offset) == (1, 0)  # the same batch, from its first offset
        assert committed_offsets(config, 2)[1] < 0
    finally:
        client.close()


def test_a_batch_larger_than_the_producer_queue_still_gets_every_start(make_config: MakeConfig) -> None:
    # librdkafka takes 10 records at a time here: the STARTs of the batch are offered again as room frees up.
    config = make_config(kafka_config={"queue.buffering.max.messages": 10})
    send(config, 50)
    with KmqClient(config) as client:
        received = receive_all(client, 50)
    on_topic = markers(config)
    assert sorted((r.partition, r.key) for r in on_topic) == sorted(
        (m.partition, m.marker_key.encode()) for m in received
    )
    assert {r.value for r in on_topic} == {StartMarker(config.msg_timeout_ms).encode()}
    assert sum(max(offset, 0) for offset in committed_offsets(config, 4).values()) == 50


def test_a_failed_end_is_counted_and_never_fails_a_batch(cluster: Any) -> None:
    # The markers topic has one partition: an END for queue partition 1 cannot be written, STARTs for 0 can.
    config = cluster.config(f"t-end-fails-{uuid.uuid4().hex[:8]}")
    cluster.create_topics({config.queue_topic: 2, config.markers_topic: 1, config.dead_letter_topic: 1})
    send(config, 5, partition=0)
    client = KmqClient(config, check=False, marker_timeout_s=10)
    try:
        client.processed(MarkerKey(1, 0))  # refused at once, or failed once librdkafka learns the partitions
        assert len(receive_all(client, 5)) == 5
        client.flush()
        assert client.failed_markers == 1
        received_again = client.receive(max_messages=5, timeout_s=0.5)
    finally:
        client.close()
    assert received_again == []
    assert committed_offsets(config, 2)[0] == 5


def test_processed_writes_end(make_config: MakeConfig) -> None:
    config = make_config()
    send(config, 2)
    with KmqClient(config) as client:
        done, _ = receive_all(client, 2)
        client.processed(done)
        client.flush()
    assert marker_values(config, done.marker_key) == [StartMarker(config.msg_timeout_ms).encode(), EndMarker().encode()]


def test_nack_and_extend_write_starts_with_their_durations(make_config: MakeConfig) -> None:
    config = make_config(nack_backoff_base_ms=250)
    send(config, 3)
    with KmqClient(config) as client:
        first, second, third = receive_all(client, 3)
        client.nack(first, delay_ms=1234)
        client.nack(second)
        client.extend(third, timeout_ms=60_000)
        client.nack(third.marker_key, delay_ms=0)
        client.flush()
    initial = StartMarker(config.msg_timeout_ms).encode()
    assert marker_values(config, first.marker_key) == [initial, StartMarker(1234).encode()]
    assert marker_values(config, second.marker_key) == [initial, StartMarker(250).encode()]
    assert marker_values(config, third.marker_key) == [initial, StartMarker(60_000).encode(), StartMarker(0).encode()]


def test_reject_writes_the_dead_letter_then_end(make_config: MakeConfig) -> None:
    config = make_config()
    send(config, 1)
    with KmqClient(config) as client:
        (msg,) = receive_all(client, 1)
        client.reject(msg, "cannot parse")
        client.flush()
    (dead,) = read_topic(config, config.dead_letter_topic, 4)
    assert (dead.key, dead.value) == (msg.key, msg.value)
    assert h.get(dead.headers, "trace") == b"t"
    assert h.get(dead.headers, h.DLQ_REASON) == b"rejected: cannot parse"
    assert h.get(dead.headers, h.ORIGINAL_TOPIC) == config.queue_topic.encode()
    assert h.get(dead.headers, h.ORIGINAL_PARTITION) == msg.partition.to_bytes(4, "big")
    assert h.decode_int64(h.get(dead.headers, h.ORIGINAL_OFFSET)) == msg.offset
    assert h.redelivery_count(dead.headers) == 0
    assert marker_values(config, msg.marker_key)[-1] == EndMarker().encode()


def test_misaligned_topics_are_refused_naming_both_counts(cluster: Any) -> None:
    config = cluster.config(f"t-refused-{uuid.uuid4().hex[:8]}")
    cluster.create_topics({config.queue_topic: 3, config.markers_topic: 2, config.dead_letter_topic: 1})
    with pytest.raises(TopicMismatchError, match=r"has 2 partitions .* has 3"):
        KmqClient(config)
    with pytest.raises(TopicMismatchError):
        KmqProducer(config)


# librdkafka's mock cluster neither stores transactional offset commits nor hides aborted records: the transactional
# tests run on the other backends only (not generated for it, rather than skipped where CI runs).
with_transactions = pytest.mark.parametrize("cluster", ["kafka", "kafka_tansu"], indirect=True)


@with_transactions
def test_transactional_mode_commits_markers_and_offsets_together(cluster: Any, make_config: MakeConfig) -> None:
    config = make_config(transactional=True)
    send(config, 10)
    with KmqClient(config) as client:
        received = receive_all(client, 10)
    read_committed_keys(config, config.markers_topic, 4, {m.marker_key.encode() for m in received})
    offsets = committed_offsets(config, 4)
    assert sum(max(offset, 0) for offset in offsets.values()) == 10


@with_transactions
def test_a_failed_transaction_leaves_neither_markers_nor_offsets(cluster: Any) -> None:
    config = cluster.config(f"t-tx-abort-{uuid.uuid4().hex[:8]}", transactional=True)
    cluster.create_topics({config.queue_topic: 2, config.markers_topic: 1, config.dead_letter_topic: 1})
    send(config, 3, partition=0)
    send(config, 3, partition=1)
    client = KmqClient(config, check=False, marker_timeout_s=10)
    try:
        with pytest.raises(MarkerWriteError):
            receive_all(client, 6)
    finally:
        client.close()
    assert read_topic(config, config.markers_topic, 1, read_committed=True) == []
    assert all(offset < 0 for offset in committed_offsets(config, 2).values())


def test_iteration_yields_messages_across_batches(make_config: MakeConfig) -> None:
    config = make_config()
    send(config, 7)
    with KmqClient(config) as client:
        seen = []
        for msg in client:
            seen.append(msg.value)
            client.processed(msg)
            if len(seen) == 7:
                break
    assert sorted(seen) == [f"m{i}".encode() for i in range(7)]


def test_a_closed_client_refuses_work(make_config: MakeConfig) -> None:
    config = make_config()
    client = KmqClient(config)
    client.close()
    client.close()
    with pytest.raises(ClientClosedError):
        client.receive()
    with pytest.raises(ClientClosedError):
        client.processed(MarkerKey(0, 0))


def test_send_batch_reports_where_each_message_went(make_config: MakeConfig) -> None:
    config = make_config()
    with KmqProducer(config) as producer:
        results = producer.send_batch([OutgoingMessage(b"a", partition=2), OutgoingMessage(b"b", partition=3)])
    assert [(r.partition, r.offset) for r in results] == [(2, 0), (3, 0)]
