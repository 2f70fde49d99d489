"""Turning failures into the one-line errors and exit codes the CLI promises (never a traceback)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from confluent_kafka import KafkaException
from rich.console import Console

from kmq.errors import KmqError

P = ParamSpec("P")
R = TypeVar("R")
err_console = Console(stderr=True, highlight=False)


def fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", markup=True, soft_wrap=True)
    return typer.Exit(code)


def friendly_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Report kmq and Kafka errors as `error: ...` on stderr with exit code 1."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except KmqError as e:
            raise fail(str(e)) from e
        except KafkaException as e:
            raise fail(f"Kafka: {e.args[0].str() if e.args else e}") from e
        except KeyboardInterrupt:
            raise typer.Exit(130) from None

    return wrapper
