"""Requests in progress, for the stall detector (kmq.progress): a request that finishes is progress."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from kmq.progress import ProgressWatch

# Probes and scrapes are not work: a stuck replica still answers them (that is how it is found stuck).
_NOT_WORK = frozenset({"/healthz", "/readyz", "/metrics"})


class ProgressMiddleware:
    """Counts each HTTP request but the probes as work from its start to its end."""

    def __init__(self, app: ASGIApp, progress: ProgressWatch) -> None:
        self.app = app
        self.progress = progress

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _NOT_WORK:
            await self.app(scope, receive, send)
            return
        self.progress.started()
        try:
            await self.app(scope, receive, send)
        finally:
            self.progress.finished()
