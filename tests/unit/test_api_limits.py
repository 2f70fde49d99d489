"""The body size limit, on a bare ASGI app (no broker): declared and actual sizes both count."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from kmq_api.limits import BodyLimitMiddleware

LIMIT = 100


async def _echo_size(request: Request) -> JSONResponse:
    return JSONResponse({"size": len(await request.body())})


@pytest.fixture
def client() -> Iterator[TestClient]:
    app = Starlette(routes=[Route("/", _echo_size, methods=["GET", "POST"])])
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=LIMIT)
    with TestClient(app) as client:
        yield client


def test_a_body_within_the_limit_reaches_the_app_whole(client: TestClient) -> None:
    assert client.post("/", content=b"x" * LIMIT).json() == {"size": LIMIT}


def test_a_body_over_the_limit_is_413(client: TestClient) -> None:
    response = client.post("/", content=b"x" * (LIMIT + 1))
    assert response.status_code == 413
    assert str(LIMIT) in response.json()["detail"]


def test_a_streamed_body_without_length_is_counted(client: TestClient) -> None:
    chunks = (b"x" * 30 for _ in range(4))
    response = client.post("/", content=chunks)
    assert response.status_code == 413


def test_a_streamed_body_within_the_limit_is_replayed(client: TestClient) -> None:
    chunks = (b"x" * 30 for _ in range(3))
    assert client.post("/", content=chunks).json() == {"size": 90}


def test_requests_without_body_pass(client: TestClient) -> None:
    assert client.get("/").json() == {"size": 0}
