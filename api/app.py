"""The app factory: routes, error answers, the body limit, and a lifespan that owns the Kafka clients."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypedDict

import anyio.to_thread
from fastapi import FastAPI

from api import problems
from api.config import ApiConfig
from api.limits import BodyLimitMiddleware
from api.metrics import ApiMetrics
from api.routers import deliveries, dlq, health, messages, queues, receipts
from api.state import ApiState

DESCRIPTION = """\
HTTP access to kmq queues: Kafka topics with per-message acknowledgement and redelivery.

Receive messages, then settle each by its **receipt**: `ack` (processed), `nack` (redeliver, after a delay) or
`extend` (more time). A message not settled before its `deadline_ms` is redelivered by the kmq tracker.
Receipts are signed and carry their queue, partition and offset, so any replica of this API settles a receipt
issued by another. Delivery is at-least-once: a receiver must tolerate duplicates.

Authenticate with `Authorization: Bearer <API key>`.
"""


class LifespanState(TypedDict):
    kmq: ApiState


def create_app(config: ApiConfig, metrics: ApiMetrics | None = None) -> FastAPI:
    """A FastAPI app serving `config.queues`; its Kafka clients live from start-up to shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[LifespanState]:
        state = await anyio.to_thread.run_sync(ApiState.open, config, metrics or ApiMetrics())
        housekeeping = asyncio.create_task(state.leave_idle_groups(), name="kmq-api-housekeeping")
        try:
            yield {"kmq": state}
        finally:
            housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await housekeeping
            await anyio.to_thread.run_sync(state.close)

    app = FastAPI(title="kmq", version="1", description=DESCRIPTION, lifespan=lifespan)
    for module in (messages, deliveries, receipts, queues, dlq, health):
        app.include_router(module.router)
    problems.install(app)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=config.max_body_bytes)
    return app
