"""`Message`: an immutable value with named fields, however it is built."""

from __future__ import annotations

import gc
import pickle

import pytest
from confluent_kafka import Message as KafkaMessage

from kmq.markers import MarkerKey
from kmq.message import Message, from_records, offsets_by_partition

FIELDS = ("value", "key", "topic", "partition", "offset", "timestamp_ms", "redelivery_count", "deadline_ms", "headers")


def make(headers: list[tuple[str, bytes | None]] | None = None) -> Message:
    return Message(b"v", b"k", "q", 2, 41, 1_000, 1, 31_000, headers)


def test_fields_keep_their_names_and_order() -> None:
    msg = make([("trace", b"t")])
    assert Message._fields == FIELDS
    assert [getattr(msg, name) for name in FIELDS] == [b"v", b"k", "q", 2, 41, 1_000, 1, 31_000, (("trace", b"t"),)]
    assert msg.marker_key == MarkerKey(2, 41)


@pytest.mark.parametrize("name", FIELDS)
def test_no_field_can_be_reassigned(name: str) -> None:
    msg = make()
    with pytest.raises(AttributeError):
        setattr(msg, name, None)
    with pytest.raises(AttributeError):
        msg.extra = 1  # type: ignore[attr-defined]  # that no new attribute can be added is the point


def test_headers_are_an_immutable_tuple_so_a_message_holds_no_tracked_object() -> None:
    first, second = make(), make([("h", b"x")])
    assert first.headers == () and second.headers == (("h", b"x"),)
    with pytest.raises(AttributeError):
        first.headers.append(("h", b"y"))  # type: ignore[attr-defined]  # immutable: no append
    # one object for the garbage collector to follow per message received, not two (the Message and a list of its own)
    received = from_records([KafkaMessage(topic="q", partition=0, offset=1, value=b"v", timestamp=(1, 5))], "q", 9)
    gc.collect()
    assert not any(gc.is_tracked(field) for field in received[0])


def test_built_the_fast_way_it_is_the_same_message() -> None:
    fast = tuple.__new__(Message, (b"v", b"k", "q", 2, 41, 1_000, 1, 31_000, ()))
    assert type(fast) is Message
    assert fast == make()
    assert repr(fast).startswith("Message(value=b'v', key=b'k', topic='q', partition=2, offset=41")


def test_it_survives_pickling() -> None:
    msg = make([("trace", b"t")])
    assert pickle.loads(pickle.dumps(msg)) == msg


def test_records_with_and_without_headers_become_messages_and_offsets_by_partition() -> None:
    counted = [("kmq-redelivery-count", b"\x02"), ("trace", b"t")]
    where = [(1, 7, None), (1, 8, counted), (0, 3, None), (1, 9, None), (0, 5, counted)]
    records = [
        KafkaMessage(topic="q", partition=p, offset=o, value=b"v", key=b"k", headers=hs, timestamp=(1, 5))
        for p, o, hs in where
    ]
    messages = from_records(records, "q", 99)
    assert [(m.partition, m.offset, m.redelivery_count) for m in messages] == [
        (1, 7, 0),
        (1, 8, 2),
        (0, 3, 0),
        (1, 9, 0),
        (0, 5, 2),
    ]
    assert all(m.topic == "q" and m.deadline_ms == 99 and m.timestamp_ms == 5 for m in messages)
    assert messages[1].headers == tuple(counted) and messages[0].headers == ()
    assert offsets_by_partition(messages) == {1: [7, 8, 9], 0: [3, 5]}


def test_a_batch_of_messages_sets_off_no_collection_of_its_own() -> None:
    # Each record is let go as its Message is built: the records and the Messages of a batch are never alive together,
    # so a batch below the young generation's threshold stays below it (were both alive: twice the batch, over it)
    size = 500
    collections: list[int] = []
    threshold = gc.get_threshold()
    watch = lambda phase, info: collections.append(info["generation"]) if phase == "start" else None  # noqa: E731
    gc.collect()  # the young count starts from 0, and counts the records as a consumer's poll would
    gc.set_threshold(size + 100, *threshold[1:])
    gc.callbacks.append(watch)
    try:
        records = [KafkaMessage(topic="q", partition=0, offset=o, value=b"v", timestamp=(1, 5)) for o in range(size)]
        messages = from_records(records, "q", 9)
    finally:
        gc.callbacks.remove(watch)
        gc.set_threshold(*threshold)
    assert collections == []
    assert [m.offset for m in messages] == list(range(size)) and records == []
