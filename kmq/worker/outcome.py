"""Running a handler on one message and turning what it did into an `Outcome`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kmq.message import Message
from kmq.worker.outcomes import Reject, Retry

_log = logging.getLogger(__name__)

Handler = Callable[[Message], Any]
AsyncHandler = Callable[[Message], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Outcome:
    """`ok`: processed; `retry`: nack (after `delay_ms`, None: backoff); `reject`: dead-letter with `reason`;
    `failed`: the handler raised something else (nacked with backoff, counted as a failure)."""

    kind: str
    delay_ms: int | None = None
    reason: str = ""

    @property
    def downstream_ok(self) -> bool:
        """What the circuit breaker counts: a rejected message is its own fault, not the downstream's."""
        return self.kind in ("ok", "reject")


OK = Outcome("ok")
FAILED = Outcome("failed")


def run_handler(handler: Handler, msg: Message) -> Outcome:
    try:
        handler(msg)
    except Exception as e:  # noqa: BLE001  # any failure of the application's code is an outcome
        return outcome_of(e, msg)
    return OK


async def run_async_handler(handler: AsyncHandler, msg: Message) -> Outcome:
    try:
        await handler(msg)
    except Exception as e:  # noqa: BLE001  # any failure of the application's code is an outcome
        return outcome_of(e, msg)
    return OK


def outcome_of(error: Exception, msg: Message) -> Outcome:
    """What the handler's exception on `msg` means; call it in the `except` block (an unexpected error is logged with
    its traceback, and retried with backoff)."""
    if isinstance(error, Retry):
        return Outcome("retry", error.delay_ms)
    if isinstance(error, Reject):
        return Outcome("reject", reason=error.reason)
    _log_failure(msg)
    return FAILED


def _log_failure(msg: Message) -> None:
    _log.warning(
        "handler failed on %s[%d]@%d (redelivery %d); it will be retried",
        msg.topic,
        msg.partition,
        msg.offset,
        msg.redelivery_count,
        exc_info=True,
    )
