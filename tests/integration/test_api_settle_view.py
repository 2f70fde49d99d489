"""The settle view's `wait_past`: a settle waits on its event loop until the view has read its markers back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from confluent_kafka import Consumer, Producer, TopicPartition

from kmq.config import KmqConfig
from kmq.markers import EndMarker, MarkerKey, encode_key
from kmq_api.settle_view import NOTE_MARGIN_MS, SettleView
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


def test_a_note_is_forgotten_past_its_deadline_by_the_margin_and_the_committed_floor_keeps_ten_minutes(
    make_config: MakeConfig,
) -> None:
    # given three acks' notes on the markers topic (one receive each): deadlines five minutes ago (past the view's
    # one-minute margin, within the tracker's ten minutes), 20 s ago (within the margin) and ten minutes ahead
    queue = make_config(partitions=1)
    now_ms = int(time.time() * 1000)
    deadlines = [now_ms - 5 * 60_000, now_ms - 20_000, now_ms + 10 * 60_000]
    assert RETAIN_MS > 5 * 60_000 and NOTE_MARGIN_MS > 20_000
    producer = Producer(queue.kafka_settings())
    for offset, deadline_ms in enumerate(deadlines):
        _ack_note(producer, queue, offset, deadline_ms)
    assert producer.flush(30) == 0
    view = SettleView(queue, 1)
    try:
        assert view.caught_up.wait(30), "the view did not read the markers topic to its end"
        # when its periodic prune has run, then it holds the two later notes only: a replica holding every note ten
        # minutes past its deadline grew for ten minutes under a steady load
        wait_for(lambda: len(view) == 2, 30, what="the five-minute-old note forgotten")
        assert [view.settled_by(MarkerKey(0, o), d - 30_000) for o, d in enumerate(deadlines)] == [None, "ack", "ack"]
        # when it writes a note itself past its deadline (a late ack), and a later prune has run (it forgot another
        # five-minute-old note, read after that write)
        late = Note("ack", now_ms - 7 * 60_000, now_ms - 6 * 60_000, now_ms - 6 * 60_000)
        view.observe(0, ((3, 1),), late, marker_offset=4)
        _ack_note(producer, queue, 10, deadlines[0])  # marker offset 3
        assert producer.flush(30) == 0
        assert asyncio.run(view.wait_past({0: 3}, 30)), "the view did not read the new note"
        wait_for(
            lambda: len(view) == 3 and view.settled_by(MarkerKey(0, 10), deadlines[0] - 30_000) is None,
            30,
            what="the new five-minute-old note forgotten, and the two later ones and the replica's own late one kept",
        )
        # then its own note outlived that prune, for its settle's verdict
        assert view.settled_by(MarkerKey(0, 3), late.issued_at_ms) == "ack"
        # and the floor it committed (with each prune) still covers the notes it forgot, ten minutes past their
        # deadline: a restarted replica resumes there, whatever the clock of the replica that committed it
        assert _committed(queue, view.group_id) == 0
    finally:
        view.close()


def _ack_note(producer: Producer, queue: KmqConfig, offset: int, deadline_ms: int) -> None:
    """An ack's note on queue offset `offset`, its receive issued 30 s before `deadline_ms`."""
    headers = [(HEADER, Note("ack", deadline_ms - 30_000, deadline_ms, deadline_ms).encode())]
    producer.produce(queue.markers_topic, EndMarker().encode(), encode_key(0, offset), partition=0, headers=headers)


def _committed(queue: KmqConfig, group_id: str) -> int:
    consumer = Consumer({**queue.kafka_settings(), "group.id": group_id})
    try:
        [committed] = consumer.committed([TopicPartition(queue.markers_topic, 0)], timeout=30)
        return int(committed.offset)
    finally:
        consumer.close()
