"""`/console`: every queue served, its partitions and backlog, rates per minute and the last hour's samples."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from kmq.errors import KmqError
from kmq_api.console.deps import PREFIX, Logged, page
from kmq_api.console.history import History
from kmq_api.deps import State
from kmq_api.served import ServedQueue

router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.get("")
async def overview(request: Request, viewer: Logged, state: State) -> HTMLResponse:
    queues = [await _queue(queue, _history(request)) for queue in state.queues.values()]
    return page(request, "overview.html", viewer, overview=queues)


@router.get("/overview.json")
async def overview_json(request: Request, viewer: Logged, state: State) -> dict[str, Any]:
    """What the overview's script redraws every few seconds."""
    history = _history(request)
    queues = [await _queue(queue, history) for queue in state.queues.values()]
    for queue in queues:
        queue["samples"] = [asdict(sample) for sample in history.of(queue["name"])]
    return {"queues": queues}


async def _queue(queue: ServedQueue, history: History) -> dict[str, Any]:
    """The queue's figures; when Kafka does not answer, the last known ones are left and `error` says why."""
    error = None
    try:
        lags = await queue.backlog()
    except KmqError as e:
        lags, error = [], str(e)
    rates = history.rates(queue.name)
    return {
        "error": error,
        "name": queue.name,
        "markers_topic": queue.config.markers_topic,
        "dead_letter_topic": queue.config.dead_letter_topic,
        "group_id": queue.config.group_id,
        "backlog": sum(lag.backlog for lag in lags),
        "partitions": [asdict(lag) for lag in lags],
        "rates": asdict(rates) if rates is not None else None,
    }


def _history(request: Request) -> History:
    history: History = request.app.state.console_history
    return history
