"""`POST /v1/queues/{queue}/ack`, `/nack`, `/extend`: settle deliveries by receipt, from any API replica."""

from __future__ import annotations

import time

import anyio.to_thread
from fastapi import APIRouter

from kmq_api.deps import Authorized, Queue, State
from kmq_api.models import AckRequest, ExtendRequest, NackRequest, SettleResponse
from kmq_api.problems import BODY_ERRORS, SETTLED
from kmq_api.responses import JsonBytes
from kmq_api.settle import Settlement, settle

router = APIRouter(prefix="/v1/queues/{queue}", tags=["receipts"], dependencies=[Authorized])
_ERRORS = {**BODY_ERRORS, **SETTLED}
_RESULTS = " The answer holds one result per receipt, in order (see `ReceiptResult.status`)."


@router.post(
    "/ack",
    response_model=SettleResponse,
    responses=_ERRORS,
    description="Mark messages processed (END markers)." + _RESULTS,
)
async def ack(queue: Queue, state: State, body: AckRequest) -> JsonBytes:
    return await _settle(queue, state, body.receipts, Settlement("ack"))


@router.post(
    "/nack",
    response_model=SettleResponse,
    responses=_ERRORS,
    description="Redeliver messages after `delay_ms` (default: exponential backoff by redelivery count)." + _RESULTS,
)
async def nack(queue: Queue, state: State, body: NackRequest) -> JsonBytes:
    if body.delay_ms is not None:
        await anyio.to_thread.run_sync(queue.retention.check, body.delay_ms, "delay_ms")
    return await _settle(queue, state, body.receipts, Settlement("nack", delay_ms=body.delay_ms))


@router.post(
    "/extend",
    response_model=SettleResponse,
    responses=_ERRORS,
    description="Give more time: the new deadline is `visibility_timeout_ms` from now; each result carries a "
    "fresh receipt with it." + _RESULTS,
)
async def extend(queue: Queue, state: State, body: ExtendRequest) -> JsonBytes:
    await anyio.to_thread.run_sync(queue.retention.check, body.visibility_timeout_ms, "visibility_timeout_ms")
    return await _settle(queue, state, body.receipts, Settlement("extend", timeout_ms=body.visibility_timeout_ms))


async def _settle(queue: Queue, state: State, receipts: list[str], settlement: Settlement) -> JsonBytes:
    started = time.perf_counter()
    results = await settle(queue, state.signer, state.metrics, receipts, settlement)
    state.metrics.settle_seconds.labels(queue.name).observe(time.perf_counter() - started)
    return JsonBytes({"results": results})
