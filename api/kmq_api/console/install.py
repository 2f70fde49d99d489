"""Wiring the console into the facade's app: routers, static files, security headers, errors as pages."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kmq_api.config import ApiConfig
from kmq_api.console.deps import PREFIX, LoginRequired, page
from kmq_api.console.history import History
from kmq_api.console.jobs import JobBoard
from kmq_api.console.routers import dead_letters, login, messages, overview
from kmq_api.console.session import SessionSigner

# Scripts and styles from this origin only (no inline script, no eval, no CDN), no plugins, no framing.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


def install(app: FastAPI, config: ApiConfig, history: History, jobs: JobBoard) -> None:
    app.state.console_signer = SessionSigner(config)
    app.state.console_history = history
    app.state.console_jobs = jobs
    for module in (login, overview, messages, dead_letters):
        app.include_router(module.router)
    app.mount(f"{PREFIX}/static", StaticFiles(directory=Path(__file__).parent / "static"), name="console-static")
    app.add_exception_handler(LoginRequired, _login_required)
    app.add_exception_handler(StarletteHTTPException, _error_page)
    app.add_middleware(SecurityHeaders)


class SecurityHeaders:
    """The console's pages and files carry a strict Content-Security-Policy (the API's JSON answers are untouched)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(PREFIX):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


async def _login_required(request: Request, error: Exception) -> Response:
    if request.method == "GET" and not request.url.path.endswith(".json"):
        return RedirectResponse(f"{PREFIX}/login", status.HTTP_303_SEE_OTHER)
    return Response("log in first", status.HTTP_401_UNAUTHORIZED, media_type="text/plain")


async def _error_page(request: Request, error: Exception) -> Response:
    assert isinstance(error, StarletteHTTPException)
    if not request.url.path.startswith(PREFIX) or request.url.path.startswith(f"{PREFIX}/static"):
        return await http_exception_handler(request, error)
    answer = page(request, "error.html", None, status=error.status_code, detail=error.detail)
    answer.status_code = error.status_code
    return answer
