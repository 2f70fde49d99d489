"""Turning failures into the one-line errors and exit codes the CLI promises (never a traceback)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from confluent_kafka import KafkaException
from rich.markup import escape

from kmq.cli.console import OutputConsole
from kmq.errors import KmqError

P = ParamSpec("P")
R = TypeVar("R")
err_console = OutputConsole(stderr=True, soft_wrap=False)


BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool whose reader closed the pipe


class StdoutConsole(OutputConsole):
    """A console for a command's output: a closed pipe raises BrokenPipeError, which `friendly_errors` turns into
    a quiet exit 141 (rich's own handling exits 1, and fails outright where stdout has no file descriptor)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def fail(message: str, code: int = 1) -> typer.Exit:
    # The message is text, not markup: "pip install 'kmq[api]'" keeps its brackets.
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)
    return typer.Exit(code)


def friendly_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Report kmq and Kafka errors as `error: ...` on stderr with exit code 1 (130 on Ctrl-C, 141 on a closed pipe)."""

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
        except BrokenPipeError:
            # The reader went away (`kmq consume | head`): end quietly, as Unix tools killed by SIGPIPE do.
            _discard_stdout()
            raise typer.Exit(BROKEN_PIPE) from None

    return wrapper


def _discard_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (captured output)
        pass
