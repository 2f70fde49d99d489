"""The answers of the hot endpoints (receive, ack, nack, extend), written straight from dicts with orjson.

Building and then re-validating a pydantic model per message cost more than the rest of a receive or an ack of 100
receipts; the models of api.models still declare these answers (`response_model=`, so the OpenAPI schema is
unchanged), and the unit tests check that every dict built here validates as its model.
"""

from __future__ import annotations

from typing import Any, TypedDict

import orjson
from starlette.responses import Response

from kmq_api.models import Encoding, ReceiptStatus


class JsonBytes(Response):
    """A JSON answer encoded by orjson (the content is already made of JSON types)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class ReceivedJson(TypedDict):
    """`ReceivedMessage` as JSON, its fields in the same order."""

    receipt: str
    partition: int
    offset: int
    value: str | None
    key: str | None
    headers: dict[str, str]
    encoding: Encoding
    redelivery_count: int
    timestamp_ms: int
    deadline_ms: int


class ResultJson(TypedDict):
    """`ReceiptResult` as JSON, its fields in the same order."""

    status: ReceiptStatus
    detail: str | None
    partition: int | None
    offset: int | None
    receipt: str | None
    deadline_ms: int | None


def receipt_result(
    status: ReceiptStatus,
    detail: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
    receipt: str | None = None,
    deadline_ms: int | None = None,
) -> ResultJson:
    return {
        "status": status,
        "detail": detail,
        "partition": partition,
        "offset": offset,
        "receipt": receipt,
        "deadline_ms": deadline_ms,
    }
