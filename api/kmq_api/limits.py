"""Request body size limit, enforced before the body is parsed (Content-Length and the bytes actually sent)."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimitMiddleware:
    """Answers 413 to any HTTP request whose body exceeds `max_body_bytes`; buffers the body to count it."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._declared_length(scope) > self.max_body_bytes:
            await self._too_large(send)
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                await self._too_large(send)
                return
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        await self.app(scope, _replay(messages, receive), send)

    @staticmethod
    def _declared_length(scope: Scope) -> int:
        for name, value in scope["headers"]:
            if name == b"content-length":
                return int(value) if value.isdigit() else 0
        return 0

    async def _too_large(self, send: Send) -> None:
        body = json.dumps({"detail": f"request body exceeds the limit of {self.max_body_bytes} bytes"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """The buffered messages first, then the real channel (for the disconnect that follows)."""
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
