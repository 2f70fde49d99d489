"""`POST /v1/queues/{queue}/receive`: long-poll for messages, each with a receipt."""

from __future__ import annotations

import time

import anyio.to_thread
from fastapi import APIRouter

from kmq.message import Message
from kmq_api.codec import to_received
from kmq_api.deps import Authorized, Queue, State
from kmq_api.models import ReceiveRequest, ReceiveResponse
from kmq_api.problems import BODY_ERRORS
from kmq_api.receipts import Receipt, ReceiptSigner
from kmq_api.responses import JsonBytes, ReceivedJson

router = APIRouter(prefix="/v1/queues/{queue}", tags=["deliveries"], dependencies=[Authorized])


@router.post("/receive", response_model=ReceiveResponse, responses=BODY_ERRORS)
async def receive(queue: Queue, state: State, body: ReceiveRequest) -> JsonBytes:
    """Up to `max_messages` messages, waiting up to `wait_ms` for the first.

    Each message must be settled (ack, nack or extend with its receipt) before `deadline_ms`, else the tracker
    redelivers it. Receivers of one queue form its worker group (`group_id`) across every API replica."""
    if body.visibility_timeout_ms is not None:
        await anyio.to_thread.run_sync(queue.retention.check, body.visibility_timeout_ms, "visibility_timeout_ms")

    def answer(messages: list[Message]) -> tuple[int, JsonBytes]:
        issued_at_ms = int(time.time() * 1000)
        received = [_received(m, queue.name, state.signer, issued_at_ms, body) for m in messages]
        return len(received), JsonBytes({"messages": received})

    count, answered = await queue.receive(body.max_messages, body.wait_ms, body.visibility_timeout_ms, answer)
    state.metrics.received.labels(queue.name).inc(count)
    return answered


def _received(
    message: Message, queue: str, signer: ReceiptSigner, issued_at_ms: int, body: ReceiveRequest
) -> ReceivedJson:
    # Any Kafka producer may set the count header; one that reads as a negative int32 counts as 0 (the receipt
    # holds it unsigned, and the nack backoff shifts by it).
    count = max(0, message.redelivery_count)
    receipt = Receipt(queue, message.partition, message.offset, issued_at_ms, message.deadline_ms, count)
    return to_received(message, signer.sign(receipt), body.encoding)
