"""`GET /healthz` (the process answers, can still write), `/readyz` (Kafka reachable, topics in order), `/metrics`."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Request, Response, status
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kmq.admin import check_topics
from kmq.errors import KmqError
from kmq_api.deps import State
from kmq_api.models import Health
from kmq_api.problems import AsciiJSONResponse
from kmq_api.state import ApiState

router = APIRouter(tags=["health"])
READY_TIMEOUT_S = 2.0


@router.get("/healthz", response_model=Health, responses={503: {"model": Health, "description": "restart me"}})
async def healthz(request: Request) -> Health | Response:
    """Liveness: the process serves requests, its producers can still write (a fatal error is for good), no
    receiver lost its brokers since its last good receive (kmq.liveness), and requests in progress are finishing
    (no stall past `stall_timeout_ms`, kmq.progress).

    It needs nothing from Kafka: before the lifespan has connected there is no state, and the process is alive."""
    state: ApiState | None = getattr(request.state, "kmq", None)
    broken = _broken_producer(state) if state is not None else None
    broken = broken or request.app.state.kmq_progress.problem()
    return _unready(broken) if broken else Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health, "description": "not ready, and why"}})
async def readyz(state: State) -> Health | Response:
    """Readiness: every queue's topics exist on a reachable cluster, with equal partition counts."""
    if state.closing:
        return _unready("shutting down")
    broken = _broken_producer(state)
    if broken:
        return _unready(broken)
    for queue in state.queues.values():
        try:
            await anyio.to_thread.run_sync(check_topics, queue.config, READY_TIMEOUT_S, queue.admin)
        except KmqError as e:
            return _unready(str(e))
    return Health(status="ok")


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
)
async def metrics(state: State) -> Response:
    """Prometheus metrics of this replica."""
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def _broken_producer(state: ApiState) -> str | None:
    if state.failure is not None:
        return state.failure
    for queue in state.queues.values():
        if queue.producer.fatal_error is not None:
            return f"the producer of {queue.name} failed: {queue.producer.fatal_error}"
        if queue.receiver_failure is not None:
            return f"the receiver of {queue.name} cannot recover: {queue.receiver_failure}"
        if queue.unavailable is not None:
            return f"the receiver of {queue.name} lost its brokers: {queue.unavailable}"
    return None


def _unready(detail: str) -> AsciiJSONResponse:
    body = Health(status="unavailable", detail=detail).model_dump()
    return AsciiJSONResponse(body, status.HTTP_503_SERVICE_UNAVAILABLE)
