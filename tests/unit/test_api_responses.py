"""The hot endpoints' answers are dicts written by orjson: each must be exactly what its pydantic model would write."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from kmq import headers as h
from kmq.message import Message
from kmq_api.codec import to_received
from kmq_api.models import ReceiptResult, ReceivedMessage, ReceiveResponse, SettleResponse
from kmq_api.responses import JsonBytes, receipt_result


def same_as_model(content: dict[str, object], model: type[BaseModel]) -> None:
    """The bytes JsonBytes writes parse to what the model, validating the same content, dumps (same key order)."""
    written = json.loads(bytes(JsonBytes(content).body))
    dumped = json.loads(model.model_validate(content).model_dump_json())
    assert written == dumped
    assert list(written) == list(dumped)
    for ours, theirs in zip(next(iter(written.values())), next(iter(dumped.values())), strict=True):
        assert list(ours) == list(theirs)


@given(
    st.binary(max_size=50),
    st.one_of(st.none(), st.binary(max_size=20)),
    st.lists(st.tuples(st.text(min_size=1, max_size=5), st.binary(max_size=5)), max_size=3),
    st.sampled_from(["utf-8", "base64"]),
)
def test_a_received_message_is_written_as_the_model_writes_it(
    value: bytes, key: bytes | None, headers: list[tuple[str, bytes]], preferred: str
) -> None:
    all_headers: h.Headers = [*headers, (h.REDELIVERY_COUNT, h.encode_count(3))]
    message = Message(value, key, "q", 1, 7, 1_000, 3, 31_000, all_headers)
    received = to_received(message, "R", preferred)  # type: ignore[arg-type]  # sampled from the Literal
    same_as_model({"messages": [received, received]}, ReceiveResponse)
    assert ReceivedMessage.model_validate(received).redelivery_count == 3


def test_every_kind_of_receipt_result_is_written_as_the_model_writes_it() -> None:
    results = [
        receipt_result("ok", None, 0, 5),
        receipt_result("ok", None, 1, 9, "fresh-receipt", 123_456),
        receipt_result("invalid", "not a receipt"),
        receipt_result("wrong_queue", "receipt belongs to queue 'a', not 'b'"),
        receipt_result("expired", "the delivery's deadline (5) has passed", 0, 6),
        receipt_result("failed", "marker not written: é", 1, 10),
    ]
    same_as_model({"results": results}, SettleResponse)
    assert [ReceiptResult.model_validate(r).status for r in results][:3] == ["ok", "ok", "invalid"]
