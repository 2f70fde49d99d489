"""`/console/queues/{queue}/dead-letters`: list with filters; redrive, move and purge (admin keys, CSRF-checked)."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Form, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from kmq.dlq import read_dead_letters
from kmq_api.console.deps import PREFIX, AdminForm, ConsoleQueue, Logged, page
from kmq_api.console.jobs import JobBoard, audit
from kmq_api.console.purge import count_before, purge_before
from kmq_api.console.selection import Filters, Picked, parse_time_ms
from kmq_api.deps import State

router = APIRouter(prefix=f"{PREFIX}/queues/{{queue}}/dead-letters", include_in_schema=False)
SHOWN = 500
Text = Annotated[str, Query(max_length=1000)]
FormText = Annotated[str, Form(max_length=1000)]
Rate = Annotated[float, Form(gt=0, le=100_000)]


@router.get("")
async def dead_letters(
    request: Request,
    viewer: Logged,
    queue: ConsoleQueue,
    state: State,
    reason: Text = "",
    key: Text = "",
    header: Text = "",
    since: Text = "",
    until: Text = "",
    pending: bool = False,
) -> HTMLResponse:
    filters = _filters(reason, key, header, since, until, pending)
    found = await anyio.to_thread.run_sync(read_dead_letters, queue.config)
    chosen = [dead for dead in found if filters.matches(dead)]
    return page(
        request,
        "dead_letters.html",
        viewer,
        queue=queue.name,
        filters=filters,
        dead_letters=chosen[:SHOWN],
        matched=len(chosen),
        others=[name for name in state.queues if name != queue.name],
        jobs=_board(request).recent(),
    )


@router.post("/redrive")
async def redrive_picked(
    request: Request,
    viewer: AdminForm,
    queue: ConsoleQueue,
    state: State,
    pick: Annotated[list[str] | None, Form()] = None,
    rate: Rate = 100.0,
    target: FormText = "",
    reason: FormText = "",
    key: FormText = "",
    header: FormText = "",
    since: FormText = "",
    until: FormText = "",
    everything: Annotated[bool, Form()] = False,
) -> Response:
    """The ticked dead letters (`pick`), or with none ticked every one the filters match (`everything` needed when
    no filter is set): back to the queue, or with `target` to another queue served here (moved)."""
    if target and target not in state.queues:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"queue {target!r} is not served here")
    if pick:
        try:
            selection: Picked | Filters = Picked.parse(pick)
        except ValueError as e:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "a pick is partition:offset") from e
    else:
        selection = _filters(reason, key, header, since, until, pending=True)
        if selection.selects_all and not everything:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "nothing ticked and no filter: tick 'all'")
    job = _board(request).redrive(viewer.name, queue.config, selection, rate, target or None)
    return RedirectResponse(f"{PREFIX}/queues/{queue.name}/dead-letters#job-{job.id}", status.HTTP_303_SEE_OTHER)


@router.get("/jobs/{job_id}")
async def job_status(request: Request, viewer: Logged, queue: ConsoleQueue, job_id: int) -> dict[str, object]:
    job = _board(request).get(job_id)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id}")
    return {
        "id": job.id,
        "done": job.done,
        "total": job.total,
        "finished": job.finished,
        "error": job.error,
        "result": job.result,
    }


@router.post("/purge")
async def purge(
    request: Request,
    viewer: AdminForm,
    queue: ConsoleQueue,
    partition: Annotated[int, Form(ge=0, le=2**31 - 1)],
    offset: Annotated[int, Form(ge=0)],
    confirm: Annotated[int | None, Form()] = None,
) -> Response:
    """Without `confirm`: a page naming how many dead letters would go. With `confirm` equal to that count: purge."""
    count = await anyio.to_thread.run_sync(count_before, queue.config, partition, offset)
    if confirm != count:
        form = {"partition": partition, "offset": offset, "count": count}
        return page(request, "purge.html", viewer, queue=queue.name, form=form, stale=confirm is not None)
    await anyio.to_thread.run_sync(purge_before, queue.config, partition, offset)
    audit.info(
        "%s purged %d dead letters of %s partition %d before offset %d",
        viewer.name,
        count,
        queue.config.dead_letter_topic,
        partition,
        offset,
    )
    return RedirectResponse(f"{PREFIX}/queues/{queue.name}/dead-letters", status.HTTP_303_SEE_OTHER)


def _filters(reason: str, key: str, header: str, since: str, until: str, pending: bool) -> Filters:
    try:
        parse_time_ms(since), parse_time_ms(until)
    except ValueError as e:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"since/until: not an ISO time ({e})") from e
    return Filters(reason, key, header, since, until, pending)


def _board(request: Request) -> JobBoard:
    board: JobBoard = request.app.state.console_jobs
    return board
