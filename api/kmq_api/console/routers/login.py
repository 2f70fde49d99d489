"""`/console/login` and `/console/logout`: an API key in, a session cookie out (HttpOnly, SameSite=Strict).

Logging out takes the session's CSRF token like the admin forms.

The login form carries a CSRF token like every other form, or a page of another site could log a visitor in under
the attacker's key (login CSRF). There is no session yet, so the token is bound to a nonce in a cookie of its own
(`kmq_console_login`, HttpOnly, SameSite=Strict), set with the form: a POST whose token is not the one of its
cookie's nonce is refused (403)."""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from kmq_api.console.deps import PREFIX, page, signer
from kmq_api.console.session import COOKIE, LOGIN_COOKIE, LOGIN_TTL_S, SESSION_TTL_MS, find_key
from kmq_api.deps import State

_log = logging.getLogger(__name__)
router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.get("/login")
async def login_form(request: Request) -> HTMLResponse:
    return _form(request, None)


@router.post("/login")
async def login(
    request: Request, state: State, key: Annotated[str, Form()] = "", csrf: Annotated[str, Form()] = ""
) -> Response:
    if not signer(request).login_token_valid(request.cookies.get(LOGIN_COOKIE), csrf):
        _log.warning("console login refused: missing or wrong CSRF token")
        raise HTTPException(status.HTTP_403_FORBIDDEN, "missing or wrong CSRF token: reload the login page")
    found = find_key(state.config, key)
    if found is None:
        _log.warning("console login refused: unknown API key")
        refused = _form(request, "Unknown API key.")
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
    answer.delete_cookie(LOGIN_COOKIE, path=PREFIX, httponly=True, samesite="strict")
    return answer


def _form(request: Request, error: str | None) -> HTMLResponse:
    """The login form with its CSRF token; the visitor's login nonce is kept, or a new one set."""
    nonce = request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(24)
    answer = page(request, "login.html", None, error=error, csrf=signer(request).login_token(nonce))
    answer.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=LOGIN_TTL_S,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return answer


@router.post("/logout")
async def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
    """Ends the session. The form carries the session's CSRF token, so a page of another site cannot log a visitor
    out; without a valid session there is nothing to end and the visitor goes to the login form."""
    now_ms = int(time.time() * 1000)
    viewer = signer(request).viewer(request.cookies.get(COOKIE), now_ms)
    if viewer is not None and not hmac.compare_digest(csrf.encode(), viewer.csrf.encode()):
        _log.warning("console logout refused: missing or wrong CSRF token")
        raise HTTPException(status.HTTP_403_FORBIDDEN, "missing or wrong CSRF token: reload the page")
    answer = RedirectResponse(f"{PREFIX}/login", status.HTTP_303_SEE_OTHER)
    answer.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict")
    return answer
