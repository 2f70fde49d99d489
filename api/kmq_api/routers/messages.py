"""`POST /v1/queues/{queue}/messages`: send a batch of messages."""

from __future__ import annotations

from confluent_kafka import KafkaError
from fastapi import APIRouter, HTTPException, status

from kmq.errors import BrokerUnavailableError
from kmq_api.codec import Payload, to_payload
from kmq_api.delivery import Delivered, Outcome, Record, is_outage
from kmq_api.deps import Authorized, Queue, State
from kmq_api.models import SendRequest, SendResponse, SentMessage
from kmq_api.problems import BODY_ERRORS

router = APIRouter(prefix="/v1/queues/{queue}", tags=["messages"], dependencies=[Authorized])


@router.post("/messages", responses=BODY_ERRORS)
async def send(queue: Queue, state: State, body: SendRequest) -> SendResponse:
    """Write messages to the queue (idempotent producer, `acks=all`); answers once every one is stored.

    A 503 means some messages may have been stored anyway: retrying can duplicate them (at-least-once)."""
    payloads = [to_payload(message, f"messages[{index}]") for index, message in enumerate(body.messages)]
    _check_sizes(payloads, state.config.max_message_bytes)
    records = [Record(queue.name, p.value, p.key, p.headers) for p in payloads]
    outcomes = await queue.producer.produce(records)
    sent = [_sent(outcome, index, queue.config.bootstrap_servers) for index, outcome in enumerate(outcomes)]
    state.metrics.sent.labels(queue.name).inc(len(sent))
    return SendResponse(messages=sent)


def _check_sizes(payloads: list[Payload], limit: int) -> None:
    for index, payload in enumerate(payloads):
        if payload.size > limit:
            detail = f"messages[{index}] is {payload.size} bytes, over the limit of {limit} (value+key+headers)"
            raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, detail)


def _sent(outcome: Outcome, index: int, bootstrap_servers: str) -> SentMessage:
    if isinstance(outcome, Delivered):
        return SentMessage(partition=outcome.partition, offset=outcome.offset)
    if outcome.code() == KafkaError.MSG_SIZE_TOO_LARGE:
        detail = f"messages[{index}] is larger than the broker accepts: {outcome.str()}"
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, detail)
    reason = "unreachable" if is_outage(outcome) else "refused the write"
    raise BrokerUnavailableError(bootstrap_servers, f"{reason}: messages[{index}]: {outcome.str()}")
