"""Dependencies of the console's routes: the viewer of the session, admin rights, the form's CSRF token, pages."""

from __future__ import annotations

import hmac
import time
from pathlib import Path
from typing import Annotated, Any

import jinja2
from fastapi import Depends, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from kmq_api.console.session import COOKIE, SessionSigner, Viewer
from kmq_api.deps import Queue

PREFIX = "/console"
# Autoescaping on for every template: message payloads are untrusted and must render as text.
_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
templates = Jinja2Templates(env=_env)


class LoginRequired(Exception):
    """No valid session: pages redirect to the login form, JSON answers 401."""


def signer(request: Request) -> SessionSigner:
    found: SessionSigner = request.app.state.console_signer
    return found


async def _viewer(request: Request) -> Viewer:
    viewer = signer(request).viewer(request.cookies.get(COOKIE), int(time.time() * 1000))
    if viewer is None:
        raise LoginRequired
    return viewer


Logged = Annotated[Viewer, Depends(_viewer)]


async def _admin(viewer: Logged) -> Viewer:
    if not viewer.admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"{viewer.name} is a read-only key: admin keys only")
    return viewer


Admin = Annotated[Viewer, Depends(_admin)]


async def _checked_form(viewer: Admin, csrf: Annotated[str, Form()] = "") -> Viewer:
    """An admin's form whose CSRF token is the session's (a cross-site form cannot know it)."""
    if not hmac.compare_digest(csrf.encode(), viewer.csrf.encode()):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "missing or wrong CSRF token: reload the page")
    return viewer


AdminForm = Annotated[Viewer, Depends(_checked_form)]


ConsoleQueue = Queue  # the REST API's: 404 for a queue this facade does not serve


def page(request: Request, template: str, viewer: Viewer | None, **context: Any) -> HTMLResponse:
    state = getattr(request.state, "kmq", None)
    queues = sorted(state.queues) if state is not None else []
    answer: HTMLResponse = templates.TemplateResponse(
        request, template, {"viewer": viewer, "queues": queues, "prefix": PREFIX, **context}
    )
    return answer
