"""Request and response bodies of the REST facade (they are its OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic.config import JsonDict

from kmq_api.config import MAX_WAIT_MS

MAX_BATCH = 1000
RESERVED_HEADER_PREFIX = "kmq-"
MAX_TIMEOUT_MS = 12 * 3600 * 1000
Encoding = Literal["utf-8", "base64"]
ReceiptStatus = Literal["ok", "invalid", "wrong_queue", "expired", "failed"]

_ENCODING = "how `value`, `key` and header values are written: utf-8 text, or base64 (standard alphabet) for bytes"
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_BASE64_OR_NULL: JsonDict = {"anyOf": [{"type": "string", "pattern": _BASE64}, {"type": "null"}]}
# The schema states what the handler checks, so a client (or a schema-driven fuzzer) can tell valid from invalid:
# with encoding base64, value, key and header values must be base64; header names must not start with kmq-.
_BASE64_WHEN_DECLARED: JsonDict = {
    "if": {"properties": {"encoding": {"const": "base64"}}, "required": ["encoding"]},
    "then": {
        "properties": {
            "value": _BASE64_OR_NULL,
            "key": _BASE64_OR_NULL,
            "headers": {"additionalProperties": {"type": "string", "pattern": _BASE64}},
        }
    },
}
_APPLICATION_HEADER_NAMES: JsonDict = {"propertyNames": {"minLength": 1, "not": {"pattern": "^[kK][mM][qQ]-"}}}


def _whole_number(value: object) -> object:
    """JSON Schema counts 5.0 as an integer, so it is 5 here too; strings and booleans stay refused (strict)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


JsonInt = Annotated[int, BeforeValidator(_whole_number)]
# Bounds inside the Annotated: on an optional field they then reach the JSON schema as minimum/maximum.
TimeoutMs = Annotated[int, Field(ge=1, le=MAX_TIMEOUT_MS), BeforeValidator(_whole_number)]
DelayMs = Annotated[int, Field(ge=0, le=MAX_TIMEOUT_MS), BeforeValidator(_whole_number)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Request(BaseModel):
    """Request bodies are strict: `"5"` is not a number, so malformed input is refused, never guessed at."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class OutgoingMessage(_Request):
    model_config = ConfigDict(json_schema_extra=_BASE64_WHEN_DECLARED)

    value: str | None = Field(description="the message value (null: a tombstone)")
    encoding: Encoding = Field(default="utf-8", description=_ENCODING)
    key: str | None = Field(default=None, description="the message key: messages with one key keep their order")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="application headers; names starting with `kmq-` are reserved for kmq",
        json_schema_extra=_APPLICATION_HEADER_NAMES,
    )

    @field_validator("headers")
    @classmethod
    def _application_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name in headers:
            if not name or name.lower().startswith(RESERVED_HEADER_PREFIX):
                raise ValueError(f"header name {name!r} is empty or reserved (kmq-*)")
        return headers


class SendRequest(_Request):
    messages: list[OutgoingMessage] = Field(min_length=1, max_length=MAX_BATCH)


class SentMessage(_Body):
    partition: int
    offset: int


class SendResponse(_Body):
    messages: list[SentMessage] = Field(description="where each message was stored, in the order sent")


class ReceiveRequest(_Request):
    max_messages: JsonInt = Field(default=10, ge=1, le=MAX_BATCH, description="at most this many messages")
    wait_ms: JsonInt = Field(
        default=0,
        ge=0,
        le=MAX_WAIT_MS,
        description="long poll: wait up to this long for a first message (0: do not wait)",
    )
    visibility_timeout_ms: TimeoutMs | None = Field(
        default=None,
        description="time to settle each message before it is redelivered (default: the queue's msg_timeout_ms)",
    )
    encoding: Encoding = Field(
        default="utf-8", description="preferred encoding; bytes that are not utf-8 come as base64"
    )


class ReceivedMessage(_Body):
    receipt: str = Field(description="opaque token for ack, nack and extend (at any API replica)")
    partition: int
    offset: int
    value: str | None
    key: str | None
    headers: dict[str, str] = Field(description="application headers (kmq's own are removed)")
    encoding: Encoding = Field(description=_ENCODING)
    redelivery_count: int = Field(description="0 on the first delivery")
    timestamp_ms: int = Field(description="the message's Kafka timestamp")
    deadline_ms: int = Field(description="epoch ms after which the message is redelivered unless settled")


class ReceiveResponse(_Body):
    messages: list[ReceivedMessage]


_RECEIPTS = "receipts from receive or extend; each is checked on its own, so one bad receipt never fails the batch"


class AckRequest(_Request):
    receipts: list[str] = Field(min_length=1, max_length=MAX_BATCH, description=_RECEIPTS)


class NackRequest(_Request):
    receipts: list[str] = Field(min_length=1, max_length=MAX_BATCH, description=_RECEIPTS)
    delay_ms: DelayMs | None = Field(
        default=None, description="redeliver after this long (default: backoff by redelivery count)"
    )


class ExtendRequest(_Request):
    receipts: list[str] = Field(min_length=1, max_length=MAX_BATCH, description=_RECEIPTS)
    visibility_timeout_ms: TimeoutMs = Field(description="new time to settle, counted from now")


class ReceiptResult(_Body):
    status: ReceiptStatus = Field(
        description=(
            "ok: done. invalid: not a receipt of this API (malformed, forged, tampered; nothing written). "
            "wrong_queue: a valid receipt of another queue (nothing written). expired: the delivery's deadline had "
            "passed, so a redelivery may already exist; ack still writes the END (this delivery will not come back, "
            "a copy made before may), nack and extend write nothing (a new START could revive a message the tracker "
            "already settled). failed: the broker refused this one marker (see detail)."
        )
    )
    detail: str | None = None
    partition: int | None = None
    offset: int | None = None
    receipt: str | None = Field(default=None, description="extend only: a receipt carrying the new deadline")
    deadline_ms: int | None = Field(default=None, description="extend only: the new deadline (epoch ms)")


class SettleResponse(_Body):
    results: list[ReceiptResult] = Field(description="one per receipt, in the order given")


class PartitionBacklog(_Body):
    partition: int
    end_offset: int = Field(description="the partition's high watermark")
    committed_offset: int | None = Field(description="the worker group's position (null: none committed)")
    backlog: int = Field(description="messages not yet received by the worker group")


class QueueInfo(_Body):
    queue: str
    markers_topic: str
    dead_letter_topic: str
    group_id: str
    partition_count: int
    backlog: int = Field(description="total lag of the worker group")
    partitions: list[PartitionBacklog]


class Problem(_Body):
    detail: str = Field(description="what went wrong, naming the field or setting when there is one")


class Health(_Body):
    status: Literal["ok", "unavailable"]
    detail: str | None = None
