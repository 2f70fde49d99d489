"""`/v1/queues/{queue}/dead-letters`: list dead letters, show one, redrive selected ones (as `kmq dlq`)."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from kmq.dlq import DeadLetter, DeadLetterFilter, read_dead_letters, redrive
from kmq_api.deps import AdminAuthorized, Authorized, Queue
from kmq_api.models import _whole_number  # JSON Schema's integers (5.0 is 5), as every body of the API
from kmq_api.problems import BODY_ERRORS, FORBIDDEN, NOT_SERVED, UNAUTHORIZED, UNAVAILABLE

router = APIRouter(prefix="/v1/queues/{queue}/dead-letters", tags=["dead letters"], dependencies=[Authorized])
_READ_ERRORS = {**UNAUTHORIZED, **NOT_SERVED, **UNAVAILABLE}
Encoding = Literal["utf-8", "base64"]
MAX_PARTITION = 2**31 - 1
MAX_OFFSET = 2**53  # JSON numbers are exact up to here
BodyPartition = Annotated[int, Field(ge=0, le=MAX_PARTITION), BeforeValidator(_whole_number)]
BodyOffset = Annotated[int, Field(ge=0, le=MAX_OFFSET), BeforeValidator(_whole_number)]


class Selection(BaseModel):
    """Which dead letters: every given field must match (offsets are the dead-letter topic's, inclusive)."""

    model_config = ConfigDict(extra="forbid")
    reason: str | None = Field(None, description="a substring of the reason")
    partition: BodyPartition | None = Field(None, description="partition of the dead-letter topic")
    from_offset: BodyOffset | None = None
    to_offset: BodyOffset | None = None
    origin_partition: BodyPartition | None = Field(None, description="partition of the queue")

    def to_filter(self, include_redriven: bool = True) -> DeadLetterFilter:
        return DeadLetterFilter(
            self.reason, self.partition, self.from_offset, self.to_offset, self.origin_partition, include_redriven
        )


class RedriveRequest(Selection):
    model_config = ConfigDict(extra="forbid", strict=True)  # a JSON body: 0 is not false, "1" is not 1
    all: bool = Field(False, description="with no filter: redrive every dead letter (else none is selected)")


class DeadLetterOut(BaseModel):
    partition: int
    offset: int
    reason: str
    origin_topic: str
    origin_partition: int | None
    origin_offset: int | None
    delivery_count: int
    first_failure_ms: int
    dead_lettered_ms: int
    redriven: bool
    key: str | None
    value: str | None
    headers: dict[str, str | None]
    encoding: Encoding


class DeadLetterList(BaseModel):
    dead_letters: list[DeadLetterOut]


class RedriveResponse(BaseModel):
    redriven: int = Field(description="sent back to the queue now")
    already_redriven: int = Field(description="selected, but redriven before: not sent again")
    foreign: int = Field(description="selected, but from another queue: left alone")


def _known_parameters(*names: str) -> Any:
    """A dependency refusing query parameters the route does not take (a typo must not widen a selection)."""

    async def check(request: Request) -> None:
        unknown = sorted(set(request.query_params) - set(names))
        if unknown:
            raise RequestValidationError(
                [{"type": "extra_forbidden", "loc": ("query", name), "msg": "unknown parameter"} for name in unknown]
            )

    return Depends(check)


Partition = Annotated[int | None, Query(ge=0, le=MAX_PARTITION)]
Offset = Annotated[int | None, Query(ge=0, le=MAX_OFFSET)]
_LIST_PARAMETERS = (
    "reason",
    "partition",
    "from_offset",
    "to_offset",
    "origin_partition",
    "pending",
    "limit",
    "encoding",
)


@router.get("", responses=_READ_ERRORS, dependencies=[_known_parameters(*_LIST_PARAMETERS)])
async def list_dead_letters(
    queue: Queue,
    reason: Annotated[str | None, Query(max_length=1000, description="a substring of the reason")] = None,
    partition: Partition = None,
    from_offset: Offset = None,
    to_offset: Offset = None,
    origin_partition: Partition = None,
    pending: Annotated[bool, Query(description="only those not redriven yet")] = False,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    encoding: Encoding = "utf-8",
) -> DeadLetterList:
    """Dead letters of the queue, oldest first per partition: reason, origin, delivery count, first failure."""
    selection = DeadLetterFilter(reason, partition, from_offset, to_offset, origin_partition, not pending)
    found = await anyio.to_thread.run_sync(read_dead_letters, queue.config)
    chosen = [dead for dead in found if selection.matches(dead)][:limit]
    return DeadLetterList(dead_letters=[_out(dead, encoding) for dead in chosen])


@router.get(
    "/{partition}/{offset}",
    responses={**_READ_ERRORS, 404: NOT_SERVED[404]},
    dependencies=[_known_parameters("encoding")],
)
async def show_dead_letter(
    queue: Queue,
    partition: Annotated[int, Path(ge=0, le=MAX_PARTITION)],
    offset: Annotated[int, Path(ge=0, le=MAX_OFFSET)],
    encoding: Encoding = "utf-8",
) -> DeadLetterOut:
    """One dead letter, with its key, value and headers."""
    found = await anyio.to_thread.run_sync(read_dead_letters, queue.config)
    for dead in found:
        if (dead.partition, dead.offset) == (partition, offset):
            return _out(dead, encoding)
    raise HTTPException(status.HTTP_404_NOT_FOUND, f"no dead letter at partition {partition} offset {offset}")


@router.post("/redrive", responses={**BODY_ERRORS, **FORBIDDEN}, dependencies=[AdminAuthorized])
async def redrive_dead_letters(queue: Queue, body: RedriveRequest) -> RedriveResponse:
    """Send the selected dead letters back to the queue: original key, value and headers, a fresh delivery count.
    Idempotent: a dead letter already redriven is not sent again. With no filter, nothing is selected unless
    `all` is true (an empty body never redrives a whole topic). Once admin keys are configured, only they may."""
    if body.to_filter().selects_all and not body.all:
        return RedriveResponse(redriven=0, already_redriven=0, foreign=0)
    result = await anyio.to_thread.run_sync(redrive, queue.config, body.to_filter())
    return RedriveResponse(redriven=result.redriven, already_redriven=result.already, foreign=result.foreign)


def _out(dead: DeadLetter, encoding: Encoding) -> DeadLetterOut:
    return DeadLetterOut(
        partition=dead.partition,
        offset=dead.offset,
        reason=dead.reason,
        origin_topic=dead.origin_topic,
        origin_partition=dead.origin_partition,
        origin_offset=dead.origin_offset,
        delivery_count=dead.delivery_count,
        first_failure_ms=dead.first_failure_ms,
        dead_lettered_ms=dead.dead_lettered_ms,
        redriven=dead.redriven,
        key=_encode(dead.key, encoding),
        value=_encode(dead.value, encoding),
        headers={name: _encode(value, encoding) for name, value in dead.headers},
        encoding=encoding,
    )


def _encode(data: bytes | None, encoding: Encoding) -> str | None:
    if data is None:
        return None
    return base64.b64encode(data).decode() if encoding == "base64" else data.decode(errors="replace")
