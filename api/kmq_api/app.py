"""The app factory: routes, error answers, the body limit, and a lifespan that owns the Kafka clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypedDict

import anyio.to_thread
from fastapi import FastAPI

from kmq.progress import ProgressWatch
from kmq_api import console, problems
from kmq_api.config import ApiConfig
from kmq_api.console.history import History
from kmq_api.console.history_store import HistoryStore
from kmq_api.console.jobs import JobBoard
from kmq_api.limits import BodyLimitMiddleware
from kmq_api.metrics import ApiMetrics
from kmq_api.progress import ProgressMiddleware
from kmq_api.routers import deliveries, dlq, health, messages, queues, receipts
from kmq_api.state import ApiState

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


def create_app(
    config: ApiConfig, metrics: ApiMetrics | None = None, on_failure: Callable[[], None] | None = None
) -> FastAPI:
    """A FastAPI app serving `config.queues`; its Kafka clients live from start-up to shutdown.

    When a background thread or task dies on an unexpected error, `/healthz` answers 503 and `on_failure` is called
    (from any thread): `kmq api` stops its server then, and exits non-zero. `app.state.kmq_failure()` says why."""
    failure: list[ApiState] = []
    metrics = metrics or ApiMetrics()
    progress = ProgressWatch("REST facade", config.stall_timeout_ms)
    metrics.last_progress.set_function(progress.last_progress_s)
    store = HistoryStore(config.queues[0], config.history_topic) if config.history_topic else None
    history = History(store=store, tracker_urls=config.tracker_urls)
    jobs = JobBoard(lambda component, error: failure[0].fail(component, error) if failure else None)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[LifespanState]:
        state = await anyio.to_thread.run_sync(ApiState.open, config, metrics, on_failure)
        failure.append(state)
        housekeeping = asyncio.create_task(state.leave_idle_groups(), name="kmq-api-housekeeping")
        state.watch(housekeeping)
        sampler = asyncio.create_task(history.run(state.queues), name="kmq-console-history")
        state.watch(sampler)
        try:
            yield {"kmq": state}
        finally:
            housekeeping.cancel()
            sampler.cancel()
            await asyncio.wait([housekeeping, sampler])  # their errors, if they died of one, went to `state.watch`
            await anyio.to_thread.run_sync(state.close)

    app = FastAPI(title="kmq", version="1", description=DESCRIPTION, lifespan=lifespan)
    app.state.kmq_failure = lambda: next((state.failure for state in failure if state.failure), None)
    app.state.kmq_progress = progress
    for module in (messages, deliveries, receipts, queues, dlq, health):
        app.include_router(module.router)
    problems.install(app)
    console.install(app, config, history, jobs)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=config.max_body_bytes)
    app.add_middleware(ProgressMiddleware, progress=progress)
    return app
