"""`kmq.aio.AsyncKmqClient` on a real broker: the sync client's end-to-end test and marker tests, as coroutines, and
an event loop that keeps turning while the client waits for Kafka."""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict
from collections.abc import Callable

import pytest

from kmq import headers as h
from kmq.aio import AsyncKmqClient
from kmq.config import KmqConfig
from kmq.errors import ClientClosedError
from kmq.markers import EndMarker, StartMarker
from kmq.message import Message
from tests.helpers import read_topic, tracker_settled, wait_for
from tests.integration.test_client import marker_values
from tests.integration.test_tracker_e2e import metric, running_tracker, send

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]


async def receive_all(client: AsyncKmqClient, count: int, timeout_s: float = 30.0) -> list[Message]:
    received: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(received) < count:
        assert time.monotonic() < deadline, f"received {len(received)} of {count} messages in {timeout_s}s"
        received += await client.receive(max_messages=count - len(received), timeout_s=0.2)
    return received


def test_every_message_is_processed_and_unacknowledged_ones_come_back_with_their_headers(
    make_config: MakeConfig,
) -> None:
    # given 1 000 messages and an async worker that leaves 10% of its deliveries unacknowledged at random
    config = make_config(partitions=4, msg_timeout_ms=1500, max_redeliveries=20)
    send(config, 1000)
    rng = random.Random(20240611)
    deliveries: dict[bytes, list[Message]] = defaultdict(list)
    processed: set[bytes] = set()
    dropped = 0

    async def work(client: AsyncKmqClient) -> None:
        nonlocal dropped
        deadline = time.monotonic() + 90
        while len(processed) < 1000:
            assert time.monotonic() < deadline, f"only {len(processed)} of 1000 processed"
            for msg in await client.receive(max_messages=500, timeout_s=0.2):
                assert msg.value is not None
                deliveries[msg.value].append(msg)
                if rng.random() < 0.1:
                    dropped += 1
                    continue
                await client.processed(msg)
                processed.add(msg.value)
        await client.flush()

    async def main() -> None:
        async with await AsyncKmqClient.connect(config) as client:
            await work(client)

    with running_tracker(config) as tracker:
        # when it works until every message has been acknowledged once
        asyncio.run(main())
        wait_for(lambda: tracker_settled(tracker), 30, what="every END consumed by the tracker")
        # then nothing was lost: each drop was redelivered once, nothing else was
        assert metric(tracker, "kmq_redeliveries_total") == dropped
        assert metric(tracker, "kmq_dead_letters_total") == 0
    assert dropped > 60
    assert processed == {f"m{i}".encode() for i in range(1000)}
    for value, copies in deliveries.items():
        first = copies[0]
        assert [c.redelivery_count for c in copies] == list(range(len(copies))), value
        for copy in copies[1:]:
            assert (copy.key, copy.partition, copy.timestamp_ms) == (first.key, first.partition, first.timestamp_ms)
            assert tuple(h.without_kmq(copy.headers)) == first.headers


def test_processed_nack_extend_and_reject_write_the_sync_clients_markers(make_config: MakeConfig) -> None:
    config = make_config(nack_backoff_base_ms=250, marker_format="kmq")  # the sync client's kmq markers
    send(config, 5)

    async def main() -> list[Message]:
        async with await AsyncKmqClient.connect(config) as client:
            done, nacked, backed_off, extended, rejected = await receive_all(client, 5)
            await client.processed(done)
            await client.nack(nacked, delay_ms=1234)
            await client.nack(backed_off)
            await client.extend(extended, timeout_ms=60_000)
            await client.reject(rejected, "cannot parse")
            await client.flush()
            return [done, nacked, backed_off, extended, rejected]

    done, nacked, backed_off, extended, rejected = asyncio.run(main())
    initial = StartMarker(config.msg_timeout_ms).encode()
    assert marker_values(config, done.marker_key) == [initial, EndMarker().encode()]
    assert marker_values(config, nacked.marker_key) == [initial, StartMarker(1234).encode()]
    assert marker_values(config, backed_off.marker_key) == [initial, StartMarker(250).encode()]
    assert marker_values(config, extended.marker_key) == [initial, StartMarker(60_000).encode()]
    assert marker_values(config, rejected.marker_key) == [initial, EndMarker().encode()]
    (dead,) = read_topic(config, config.dead_letter_topic, 4)
    assert (dead.key, dead.value) == (rejected.key, rejected.value)
    assert h.get(dead.headers, h.DLQ_REASON) == b"rejected: cannot parse"


def test_the_event_loop_keeps_turning_while_receive_waits_and_a_closed_client_refuses_work(
    make_config: MakeConfig,
) -> None:
    config = make_config()

    async def main() -> tuple[int, float]:
        client = await AsyncKmqClient.connect(config)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        started = time.monotonic()
        assert await client.receive(max_messages=10, timeout_s=1.0) == []  # nothing there: waits the whole second
        waited = time.monotonic() - started
        task.cancel()
        await client.close()
        with pytest.raises(ClientClosedError):
            await client.receive()
        return ticks, waited

    ticks, waited = asyncio.run(main())
    # a blocked loop would have ticked at most once during the wait
    assert waited >= 0.9
    assert ticks >= 20, ticks
