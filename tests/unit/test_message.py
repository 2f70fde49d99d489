"""`Message`: an immutable value with named fields, however it is built."""

from __future__ import annotations

import pickle

import pytest

from kmq.markers import MarkerKey
from kmq.message import Message

FIELDS = ("value", "key", "topic", "partition", "offset", "timestamp_ms", "redelivery_count", "deadline_ms", "headers")


def make(headers: list[tuple[str, bytes | None]] | None = None) -> Message:
    return Message(b"v", b"k", "q", 2, 41, 1_000, 1, 31_000, headers)


def test_fields_keep_their_names_and_order() -> None:
    msg = make([("trace", b"t")])
    assert Message._fields == FIELDS
    assert [getattr(msg, name) for name in FIELDS] == [b"v", b"k", "q", 2, 41, 1_000, 1, 31_000, [("trace", b"t")]]
    assert msg.marker_key == MarkerKey(2, 41)


@pytest.mark.parametrize("name", FIELDS)
def test_no_field_can_be_reassigned(name: str) -> None:
    msg = make()
    with pytest.raises(AttributeError):
        setattr(msg, name, None)
    with pytest.raises(AttributeError):
        msg.extra = 1  # type: ignore[attr-defined]  # that no new attribute can be added is the point


def test_headers_default_to_a_fresh_empty_list() -> None:
    first, second = make(), make()
    assert first.headers == [] and first.headers is not second.headers


def test_built_the_fast_way_it_is_the_same_message() -> None:
    fast = tuple.__new__(Message, (b"v", b"k", "q", 2, 41, 1_000, 1, 31_000, []))
    assert type(fast) is Message
    assert fast == make()
    assert repr(fast).startswith("Message(value=b'v', key=b'k', topic='q', partition=2, offset=41")


def test_it_survives_pickling() -> None:
    msg = make([("trace", b"t")])
    assert pickle.loads(pickle.dumps(msg)) == msg
