"""`/console`: every queue served, its partitions and backlog, rates per minute and the last hour's samples."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from kmq.errors import KmqError
from kmq_api.console.deps import PREFIX, Logged, page
from kmq_api.console.history import History
from kmq_api.console.trackers import Replica, probe
from kmq_api.deps import State
from kmq_api.served import ServedQueue

router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.get("")
async def overview(request: Request, viewer: Logged, state: State) -> HTMLResponse:
    replicas = await _replicas(state.config.tracker_urls)
    queues = [await _queue(queue, _history(request), replicas) for queue in state.queues.values()]
    return page(request, "overview.html", viewer, overview=queues, trackers_known=bool(replicas))


@router.get("/overview.json")
async def overview_json(request: Request, viewer: Logged, state: State) -> dict[str, Any]:
    """What the overview's script redraws every few seconds."""
    history = _history(request)
    replicas = await _replicas(state.config.tracker_urls)
    queues = [await _queue(queue, history, replicas) for queue in state.queues.values()]
    for queue in queues:
        queue["samples"] = [asdict(sample) for sample in history.of(queue["name"])]
    return {"queues": queues}


async def _replicas(urls: tuple[str, ...]) -> list[Replica]:
    return await anyio.to_thread.run_sync(lambda: [probe(url) for url in urls]) if urls else []


def _trackers(queue: ServedQueue, replicas: list[Replica]) -> dict[str, Any]:
    """In flight (pending STARTs) and the most overdue deadline of the queue, and the replicas holding it."""
    topic = queue.config.markers_topic
    held = [partition for replica in replicas for partition in replica.of(topic)]
    return {
        "in_flight": sum(partition.pending for partition in held) if replicas else None,
        "overdue_s": max((partition.overdue_s for partition in held), default=0.0) if replicas else None,
        "replicas": [
            {
                "url": replica.url,
                "healthy": replica.healthy,
                "detail": replica.detail,
                "partitions": [partition.partition for partition in replica.of(topic)],
            }
            for replica in replicas
        ],
    }


async def _queue(queue: ServedQueue, history: History, replicas: list[Replica]) -> dict[str, Any]:
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
        **_trackers(queue, replicas),
    }


def _history(request: Request) -> History:
    history: History = request.app.state.console_history
    return history
