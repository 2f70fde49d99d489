"""A fast lane for the hot endpoints (receive, ack): well-formed requests skip FastAPI's per-request machinery.

FastAPI spends ~130 us per request solving the routes' dependencies and parsing the body (measured in-process
against a bare Starlette route doing the same validation); at two requests per 100 messages that was ~8 % of the
API's CPU per message. This middleware answers a `POST /v1/queues/{queue}/receive` or `/ack` itself only when FastAPI
would run the endpoint: the queue is served, the bearer key is accepted (the same check as `deps.require_api_key`),
the body is `application/json` and validates as the route's model. It then calls the same endpoint function, and
turns the exceptions it raises into answers with the app's own exception handlers. Anything else - a refused key, an
unknown queue, a body that does not parse or validate, another content type - goes to FastAPI unchanged (with the
body replayed), so every error answer and the OpenAPI schema are FastAPI's own.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import key_accepted
from api.limits import replay
from api.models import AckRequest, ReceiveRequest
from api.routers import deliveries, receipts
from api.served import ServedQueue
from api.state import ApiState

Endpoint = Callable[[ServedQueue, ApiState, Any], Awaitable[Response]]
# The routes' path pattern ({queue} matches one segment, as Starlette's) and, per action, its body model and endpoint.
_PATH = re.compile(r"/v1/queues/([^/]+)/(receive|ack)")
_ROUTES: dict[str, tuple[type[BaseModel], Endpoint]] = {
    "receive": (ReceiveRequest, deliveries.receive),
    "ack": (AckRequest, receipts.ack),
}
_BEARER = b"Bearer "


class HotRoutes:
    """Serves well-formed receive and ack requests directly; hands every other request to `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = _target(scope)
        if target is None:
            await self.app(scope, receive, send)
            return
        queue, state, (model, endpoint) = target
        messages, body = await _read_body(receive)
        parsed = _parse(model, body)
        if parsed is None:
            await self.app(scope, replay(messages, receive), send)
            return
        try:
            response = await endpoint(queue, state, parsed)
        except Exception as e:
            handler = _handler_for(scope, e)
            if handler is None:
                raise  # as FastAPI: no handler, so the server's 500
            # The handlers read the queue from the path parameters, as FastAPI's router would have set them.
            routed = {**scope, "path_params": {"queue": queue.name}}
            response = await handler(Request(routed, receive), e)
        await response(scope, receive, send)


def _target(scope: Scope) -> tuple[ServedQueue, ApiState, tuple[type[BaseModel], Endpoint]] | None:
    """The queue, state and route of a request the fast lane may serve, or None (FastAPI serves it)."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
        return None
    match = _PATH.fullmatch(scope["path"])
    state: ApiState | None = scope.get("state", {}).get("kmq") if match else None
    if match is None or state is None or state.closing:
        return None
    queue = state.queues.get(match[1])
    authorization, content_type = _headers(scope)
    if queue is None or content_type != b"application/json":
        return None
    offered = authorization[len(_BEARER) :] if authorization and authorization.startswith(_BEARER) else None
    if not key_accepted(state.config, offered):
        return None
    return queue, state, _ROUTES[match[2]]


def _headers(scope: Scope) -> tuple[bytes | None, bytes | None]:
    """Authorization and Content-Type; None for one absent or sent twice (FastAPI then decides)."""
    found: dict[bytes, list[bytes]] = {b"authorization": [], b"content-type": []}
    for name, value in scope["headers"]:
        if name in found:
            found[name].append(value)
    authorization, content_type = found[b"authorization"], found[b"content-type"]
    return (
        authorization[0] if len(authorization) == 1 else None,
        content_type[0] if len(content_type) == 1 else None,
    )


async def _read_body(receive: Receive) -> tuple[list[Message], bytes | None]:
    """The request's messages (to replay) and its body; None for the body when the client left first."""
    messages: list[Message] = []
    chunks: list[bytes] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return messages, b"".join(chunks)


def _parse(model: type[BaseModel], body: bytes | None) -> BaseModel | None:
    """The body as the route's model, or None where FastAPI must answer (it parses more leniently: its answer)."""
    if body is None:
        return None
    try:
        return model.model_validate(orjson.loads(body))
    except (orjson.JSONDecodeError, ValidationError):
        return None


def _handler_for(scope: Scope, error: Exception) -> Callable[[Request, Exception], Awaitable[Response]] | None:
    """The app's handler for `error`, looked up along its class hierarchy as Starlette's ExceptionMiddleware does."""
    handlers = scope["app"].exception_handlers
    for kind in type(error).__mro__:
        if kind in handlers:
            handler: Callable[[Request, Exception], Awaitable[Response]] = handlers[kind]
            return handler
    return None
