"""`GET /healthz` (the process answers), `/readyz` (Kafka reachable, topics in order), `/metrics` (Prometheus)."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Response, status
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.deps import State
from api.models import Health
from api.problems import AsciiJSONResponse
from kmq.admin import check_topics
from kmq.errors import KmqError

router = APIRouter(tags=["health"])
READY_TIMEOUT_S = 2.0


@router.get("/healthz")
async def healthz() -> Health:
    """Liveness: the process serves requests."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health, "description": "not ready, and why"}})
async def readyz(state: State) -> Health | Response:
    """Readiness: every queue's topics exist on a reachable cluster, with equal partition counts."""
    if state.closing:
        return _unready("shutting down")
    for queue in state.queues.values():
        try:
            await anyio.to_thread.run_sync(check_topics, queue.config, READY_TIMEOUT_S)
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


def _unready(detail: str) -> AsciiJSONResponse:
    body = Health(status="unavailable", detail=detail).model_dump()
    return AsciiJSONResponse(body, status.HTTP_503_SERVICE_UNAVAILABLE)
