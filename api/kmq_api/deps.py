"""Dependencies of the routes, as `Annotated` aliases: the app state, the queue named in the path, the caller's key."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from kmq_api.served import ServedQueue
from kmq_api.state import ApiState

_bearer = HTTPBearer(auto_error=False, description="an API key from KMQ_API_KEYS")


async def _state(request: Request) -> ApiState:
    state: ApiState = request.state.kmq
    return state


State = Annotated[ApiState, Depends(_state)]


async def _queue(queue: str, state: State) -> ServedQueue:
    served = state.queues.get(queue)
    if served is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"queue {queue!r} is not served by this API")
    return served


Queue = Annotated[ServedQueue, Depends(_queue)]


async def require_api_key(
    state: State, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """401 unless the request carries `Authorization: Bearer <key>` with a configured key (or access is open)."""
    keys = state.config.all_keys
    if not keys and state.config.allow_anonymous:
        return
    offered = credentials.credentials.encode() if credentials is not None else b""
    # Compare against every key, in constant time, so timing tells nothing about which key nearly matched.
    matched = [hmac.compare_digest(offered, key.get_secret_value().encode()) for key in keys]
    if credentials is None or not any(matched):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or unknown API key (send `Authorization: Bearer <key>`)",
            headers={"WWW-Authenticate": "Bearer"},
        )


Authorized = Depends(require_api_key)


async def require_admin_key(
    state: State, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """403 for a read-only key once admin keys are configured (KMQ_API_ADMIN_KEYS); with none, every key may."""
    admins = state.config.admin_keys
    if not admins:
        return
    offered = credentials.credentials.encode() if credentials is not None else b""
    if not any([hmac.compare_digest(offered, key.get_secret_value().encode()) for key in admins]):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, "a read-only key: only KMQ_API_ADMIN_KEYS may change dead letters"
        )


AdminAuthorized = Depends(require_admin_key)
