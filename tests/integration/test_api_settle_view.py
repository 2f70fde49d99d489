"""The settle view's `wait_past`: a settle waits on its event loop until the view has read its markers back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from confluent_kafka import Producer

from kmq.config import KmqConfig
from kmq.markers import EndMarker, MarkerKey, encode_key
from kmq_api.settle_view import SettleView
from kmq_api.settlements import HEADER, RETAIN_MS, Note
from tests.helpers import wait_for

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


def test_a_note_is_forgotten_once_its_deadline_is_past_by_the_margin_not_the_trackers_ten_minutes(
    make_config: MakeConfig,
) -> None:
    # given two acks' notes on the markers topic: one whose receipt's deadline passed five minutes ago (past the
    # view's margin, within the tracker's ten minutes), one whose deadline is ten minutes ahead
    queue = make_config(partitions=1)
    now_ms = int(time.time() * 1000)
    old, recent = now_ms - 5 * 60_000, now_ms + 10 * 60_000
    assert RETAIN_MS > 5 * 60_000  # the tracker still keeps the old note
    producer = Producer(queue.kafka_settings())
    for offset, deadline_ms in ((0, old), (1, recent)):
        note = Note("ack", deadline_ms - 30_000, deadline_ms, deadline_ms)
        headers = [(HEADER, note.encode())]
        producer.produce(queue.markers_topic, EndMarker().encode(), encode_key(0, offset), partition=0, headers=headers)
    assert producer.flush(30) == 0
    view = SettleView(queue, 1)
    try:
        assert view.caught_up.wait(30), "the view did not read the markers topic to its end"
        # when its periodic prune has run, then it holds the recent note only: a replica holding every note for ten
        # minutes past its deadline grew by ~870 bytes a note for ten minutes under steady receive and ack load
        wait_for(lambda: len(view) == 1, 30, what="the old note forgotten, the recent one kept")
        assert view.settled_by(MarkerKey(0, 1), recent - 30_000) == "ack"
        assert view.settled_by(MarkerKey(0, 0), old - 30_000) is None
    finally:
        view.close()
