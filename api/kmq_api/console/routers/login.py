"""`/console/login` and `/console/logout`: an API key in, a session cookie out (HttpOnly, SameSite=Strict)."""

from __future__ import annotations

import logging
import time
from typing import Annotated

from fastapi import APIRouter, Form, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from kmq_api.console.deps import PREFIX, page, signer
from kmq_api.console.session import COOKIE, SESSION_TTL_MS, find_key
from kmq_api.deps import State

_log = logging.getLogger(__name__)
router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.get("/login")
async def login_form(request: Request) -> HTMLResponse:
    return page(request, "login.html", None, error=None)


@router.post("/login")
async def login(request: Request, state: State, key: Annotated[str, Form()] = "") -> Response:
    found = find_key(state.config, key)
    if found is None:
        _log.warning("console login refused: unknown API key")
        refused = page(request, "login.html", None, error="Unknown API key.")
        refused.status_code = status.HTTP_401_UNAUTHORIZED
        return refused
    fingerprint, admin = found
    _log.info("console login: %s-%s", "admin" if admin else "read", fingerprint)
    answer = RedirectResponse(PREFIX, status.HTTP_303_SEE_OTHER)
    answer.set_cookie(
        COOKIE,
        signer(request).issue(fingerprint, int(time.time() * 1000)),
        max_age=SESSION_TTL_MS // 1000,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return answer


@router.post("/logout")
async def logout() -> Response:
    answer = RedirectResponse(f"{PREFIX}/login", status.HTTP_303_SEE_OTHER)
    answer.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict")
    return answer
