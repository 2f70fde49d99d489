"""The settle view's `wait_past`: a settle waits on its event loop until the view has read its markers back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from confluent_kafka import Producer

from kmq.config import KmqConfig
from kmq_api.settle_view import SettleView

MakeConfig = Callable[..., KmqConfig]


def test_wait_past_returns_once_the_view_read_past_the_offset_and_false_when_it_runs_out(
    make_config: MakeConfig,
) -> None:
    queue = make_config(partitions=2)
    view = SettleView(queue, 2)
    producer = Producer(queue.kafka_settings())
    try:
        assert view.caught_up.wait(30), "the view did not read the markers topic to its end"

        async def waits() -> tuple[bool, bool, bool]:
            # given an empty partition 1: a wait past its offset 1 runs out
            ran_out = await view.wait_past({1: 1}, 0.2)
            # when two records land there while a settle waits past offset 1 (with one that is past already)
            waiting = asyncio.ensure_future(view.wait_past({0: -1, 1: 1}, 30))
            await asyncio.sleep(0)  # it waits before the records are written
            early = waiting.done()
            for _ in range(2):
                producer.produce(queue.markers_topic, value=b"not a marker", partition=1)
            assert await asyncio.to_thread(producer.flush, 30) == 0
            # then the view's thread wakes it on this loop
            return ran_out, early, await waiting

        assert asyncio.run(waits()) == (False, False, True)
        # and a wait already satisfied returns at once, without waiting
        assert asyncio.run(asyncio.wait_for(view.wait_past({1: 1}, 30), 1))
    finally:
        view.close()
