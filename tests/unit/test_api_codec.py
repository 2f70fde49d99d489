"""JSON <-> Kafka bytes for the REST facade: utf-8 or base64, for values, keys and header values."""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kmq import headers as h
from kmq.message import Message
from kmq_api.codec import UndecodableError, to_payload, to_received
from kmq_api.models import OutgoingMessage, ReceivedMessage


def _message(value: bytes | None, key: bytes | None = None, headers: h.Headers | None = None) -> Message:
    return Message(value, key, "q", 1, 7, 1_000, 2, 31_000, headers or [])


def test_utf8_text_becomes_its_bytes() -> None:
    payload = to_payload(OutgoingMessage(value="héllo", key="k", headers={"trace": "t1"}), "messages[0]")
    assert (payload.value, payload.key, payload.headers) == ("héllo".encode(), b"k", [("trace", b"t1")])
    assert payload.size == len("héllo".encode()) + 1 + len("trace") + 2


def test_base64_applies_to_value_key_and_header_values() -> None:
    message = OutgoingMessage(value="AAE=", encoding="base64", key="/w==", headers={"bin": "AgM="})
    payload = to_payload(message, "messages[0]")
    assert (payload.value, payload.key, payload.headers) == (b"\x00\x01", b"\xff", [("bin", b"\x02\x03")])


def test_a_null_value_is_a_tombstone() -> None:
    assert to_payload(OutgoingMessage(value=None), "m").value is None


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (OutgoingMessage(value="not base64!", encoding="base64"), "messages[3].value"),
        (OutgoingMessage(value="", key="A", encoding="base64"), "messages[3].key"),
        (OutgoingMessage(value="", headers={"h": "%%"}, encoding="base64"), "messages[3].headers.h"),
        (OutgoingMessage(value="\ud800"), "messages[3].value"),
        (OutgoingMessage(value="", headers={"\udfff": "x"}), "messages[3].headers"),
    ],
)
def test_undecodable_fields_are_named(message: OutgoingMessage, field: str) -> None:
    with pytest.raises(UndecodableError, match=f"^{re.escape(field)}"):
        to_payload(message, "messages[3]")


@pytest.mark.parametrize("name", ["kmq-redelivery-count", "KMQ-anything", ""])
def test_reserved_or_empty_header_names_are_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="reserved"):
        OutgoingMessage(value="v", headers={name: "x"})


def test_a_received_text_message_stays_text_without_kmq_headers() -> None:
    headers: h.Headers = [("trace", b"t1"), (h.REDELIVERY_COUNT, h.encode_count(2))]
    received = ReceivedMessage(**to_received(_message(b"hello", b"k", headers), "R", "utf-8"))
    assert (received.value, received.key, received.headers) == ("hello", "k", {"trace": "t1"})
    assert received.encoding == "utf-8"
    assert (received.partition, received.offset, received.redelivery_count, received.deadline_ms) == (1, 7, 2, 31_000)
    assert received.receipt == "R"


@pytest.mark.parametrize(
    "message",
    [_message(b"\xff"), _message(b"ok", b"\xfe"), _message(b"ok", None, [("bin", b"\x80")])],
)
def test_any_non_utf8_part_turns_the_whole_message_base64(message: Message) -> None:
    received = ReceivedMessage(**to_received(message, "R", "utf-8"))
    assert received.encoding == "base64"
    assert received.value is not None
    assert base64.b64decode(received.value) == message.value


@given(st.binary(), st.one_of(st.none(), st.binary()), st.sampled_from(["utf-8", "base64"]))
def test_what_is_received_decodes_back_to_the_same_bytes(value: bytes, key: bytes | None, preferred: str) -> None:
    received = ReceivedMessage(**to_received(_message(value, key, [("h", b"\x00x")]), "R", preferred))  # type: ignore[arg-type]
    echoed = OutgoingMessage(
        value=received.value, key=received.key, headers=received.headers, encoding=received.encoding
    )
    payload = to_payload(echoed, "m")
    assert (payload.value, payload.key, payload.headers) == (value, key, [("h", b"\x00x")])
