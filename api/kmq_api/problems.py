"""Error responses: Kafka trouble is a 503 with its reason, bad input a 4xx naming the field (never a 500)."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from confluent_kafka import KafkaException
from fastapi import FastAPI, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from kmq.errors import DurationTooLongError, KmqError
from kmq_api.codec import UndecodableError
from kmq_api.models import Problem
from kmq_api.settle import AlreadySettledError
from kmq_api.state import ApiState

_log = logging.getLogger(__name__)

# The documented error answers of the routes (the OpenAPI schema promises exactly these).
UNAUTHORIZED: dict[int | str, dict[str, Any]] = {401: {"model": Problem, "description": "missing or unknown API key"}}
FORBIDDEN: dict[int | str, dict[str, Any]] = {
    403: {"model": Problem, "description": "a read-only key (admin keys only)"}
}
NOT_SERVED: dict[int | str, dict[str, Any]] = {404: {"model": Problem, "description": "queue not served"}}
TOO_LARGE: dict[int | str, dict[str, Any]] = {413: {"model": Problem, "description": "body or a message too large"}}
UNAVAILABLE: dict[int | str, dict[str, Any]] = {503: {"model": Problem, "description": "Kafka unavailable"}}
MALFORMED: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem, "description": "the body is not UTF-8 JSON, or (send) a base64 field does not decode"}
}
SETTLED: dict[int | str, dict[str, Any]] = {
    409: {
        "model": Problem,
        "description": "a receipt's delivery was settled already (or the receipt spent by an extend), or another"
        " replica settled it first: this request's settle of it has no effect",
    }
}
# Every route with a body under /v1/queues/{queue} may answer these.
BODY_ERRORS = {**UNAUTHORIZED, **NOT_SERVED, **MALFORMED, **TOO_LARGE, **UNAVAILABLE}


class AsciiJSONResponse(JSONResponse):
    """JSON with non-ASCII escaped: echoing user input that holds a lone surrogate must not fail to encode."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def install(app: FastAPI) -> None:
    app.add_exception_handler(AlreadySettledError, _conflict)
    app.add_exception_handler(DurationTooLongError, _too_long)
    app.add_exception_handler(KmqError, _unavailable)
    app.add_exception_handler(KafkaException, _unavailable)
    app.add_exception_handler(UndecodableError, _undecodable)
    app.add_exception_handler(RequestValidationError, _invalid)


async def _unavailable(request: Request, error: Exception) -> JSONResponse:
    queue = str(request.path_params.get("queue", ""))
    _log.warning("503 for %s %s: %s", request.method, request.url.path, error)
    state: ApiState | None = getattr(request.state, "kmq", None)
    if state is not None and queue in state.queues:
        state.metrics.broker_errors.labels(queue).inc()
    detail = str(error.args[0].str() if isinstance(error, KafkaException) and error.args else error)
    return AsciiJSONResponse({"detail": f"Kafka unavailable: {detail}"}, status.HTTP_503_SERVICE_UNAVAILABLE)


async def _too_long(request: Request, error: Exception) -> JSONResponse:
    """A duration the markers topic cannot hold: refused like any invalid field (the API's names are its fields)."""
    assert isinstance(error, DurationTooLongError)
    problem = {"type": "value_error", "loc": ["body", error.what], "msg": str(error), "input": error.duration_ms}
    return AsciiJSONResponse({"detail": [problem]}, status.HTTP_422_UNPROCESSABLE_CONTENT)


async def _conflict(request: Request, error: Exception) -> JSONResponse:
    return AsciiJSONResponse({"detail": str(error)}, status.HTTP_409_CONFLICT)


async def _undecodable(request: Request, error: Exception) -> JSONResponse:
    return AsciiJSONResponse({"detail": str(error)}, status.HTTP_400_BAD_REQUEST)


async def _invalid(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    detail = _finite(jsonable_encoder(error.errors()))
    return AsciiJSONResponse({"detail": detail}, status.HTTP_422_UNPROCESSABLE_CONTENT)


def _finite(value: Any) -> Any:
    """`value` with NaN and infinities as strings: a request may hold `NaN`, `Infinity` or `1e400` (Python's json
    reads them as floats), the error echoes that input, and strict JSON has no way to write it."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # 'nan', 'inf', '-inf'
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
