"""`kmq send`: values from arguments, stdin, or `--count N` numbered messages."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kmq.cli.console import OutputConsole
from kmq.cli.errors import fail, friendly_errors
from kmq.cli.options import BootstrapOption, QueueOption, build_config
from kmq.headers import Headers
from kmq.producer import KmqProducer

_console = OutputConsole(stderr=True)


@friendly_errors
def send(
    values: Annotated[list[str] | None, typer.Argument(help="values to send; none: one per line of stdin")] = None,
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
    count: Annotated[int | None, typer.Option("--count", "-n", min=1, help="send N numbered messages")] = None,
    key: Annotated[str | None, typer.Option(help="key of every message")] = None,
    header: Annotated[list[str] | None, typer.Option("--header", "-H", help="NAME=VALUE, repeatable")] = None,
) -> None:
    """Send messages to a queue."""
    if count is not None and values:
        raise fail("give values or --count, not both")
    config = build_config(bootstrap_servers, queue)
    headers = _parse_headers(header or [])
    total = count if count is not None else (len(values) if values else None)
    sent = 0
    with KmqProducer(config) as producer, _progress() as progress:
        task = progress.add_task("sending", total=total)
        for value in _values(values, count):
            producer.send(value.encode(), key.encode() if key else None, headers)
            sent += 1
            if sent % 1000 == 0:
                progress.update(task, completed=sent)
        producer.flush()
        progress.update(task, completed=sent, total=sent)
    _console.print(f"sent {sent} messages to {config.queue_topic}")


def _values(values: list[str] | None, count: int | None) -> Iterator[str]:
    if count is not None:
        yield from (f"message-{i}" for i in range(count))
    elif values:
        yield from values
    else:
        yield from (line.rstrip("\n") for line in sys.stdin)


def _parse_headers(pairs: list[str]) -> Headers:
    parsed: Headers = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise fail(f"--header {pair!r}: expected NAME=VALUE")
        parsed.append((name, value.encode()))
    return parsed


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=_console
    )


def register(app: typer.Typer) -> None:
    app.command("send")(send)
