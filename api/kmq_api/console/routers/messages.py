"""`/console/queues/{queue}/peek` and `/story`: look at messages without changing anything (no START, no commit)."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from kmq_api.console.deps import PREFIX, ConsoleQueue, Logged, page
from kmq_api.console.records import peek
from kmq_api.console.story import story

router = APIRouter(prefix=f"{PREFIX}/queues/{{queue}}", include_in_schema=False)
MAX_PEEK = 100


@router.get("/peek")
async def peek_page(
    request: Request,
    viewer: Logged,
    queue: ConsoleQueue,
    partition: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    offset: Annotated[int | None, Query(ge=0)] = None,
    count: Annotated[int, Query(ge=1, le=MAX_PEEK)] = 10,
) -> HTMLResponse:
    """From `offset`, or by default from the worker group's position (the next messages it will receive)."""
    if offset is None:
        lags = {lag.partition: lag for lag in await queue.backlog()}
        lag = lags.get(partition)
        offset = max(0, lag.end_offset - lag.backlog) if lag is not None else 0
    shown = await anyio.to_thread.run_sync(peek, queue.config, partition, offset, count)
    form = {"partition": partition, "offset": offset, "count": count}
    return page(request, "peek.html", viewer, queue=queue.name, form=form, messages=shown)


@router.get("/story")
async def story_page(
    request: Request,
    viewer: Logged,
    queue: ConsoleQueue,
    partition: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> HTMLResponse:
    told = await anyio.to_thread.run_sync(story, queue.config, partition, offset)
    form = {"partition": partition, "offset": offset}
    return page(request, "story.html", viewer, queue=queue.name, form=form, story=told)
