"""`kmq consume`: print messages and acknowledge them (or leave some unacknowledged, to watch redelivery)."""

from __future__ import annotations

import random
import time
from typing import Annotated

import typer
from rich.markup import escape

from kmq.cli.console import OutputConsole
from kmq.cli.errors import StdoutConsole, friendly_errors
from kmq.cli.options import BootstrapOption, QueueOption, build_config
from kmq.client import KmqClient
from kmq.message import Message

_out = StdoutConsole()
_err = OutputConsole(stderr=True)


@friendly_errors
def consume(
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
    drop_rate: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="fraction left unacknowledged, to show redelivery")
    ] = 0.0,
    max_messages: Annotated[int | None, typer.Option("--max", min=1, help="stop after N messages")] = None,
    idle_exit_s: Annotated[
        float | None, typer.Option("--idle-exit", min=0.0, help="stop after this many seconds without a message")
    ] = None,
    msg_timeout_ms: Annotated[
        int | None, typer.Option(min=1, help="time before redelivery (env KMQ_MSG_TIMEOUT_MS)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="random seed for --drop-rate")] = None,
) -> None:
    """Print messages from a queue and acknowledge each (Ctrl-C to stop)."""
    config = build_config(bootstrap_servers, queue, msg_timeout_ms=msg_timeout_ms)
    chance = random.Random(seed)
    seen = acked = 0
    last_message = time.monotonic()
    with KmqClient(config) as client:
        while max_messages is None or seen < max_messages:
            batch = client.receive(min(500, (max_messages or 500) - seen), timeout_s=0.5)
            if batch:
                last_message = time.monotonic()
            elif idle_exit_s is not None and time.monotonic() - last_message > idle_exit_s:
                break
            for msg in batch:
                dropped = chance.random() < drop_rate
                # Printed (and flushed) before the acknowledgement: a message whose output fails (a closed pipe, a
                # full disk, Ctrl-C) stays unacknowledged and is redelivered, never acknowledged yet never shown.
                _print(msg, dropped)
                if not dropped:
                    client.processed(msg)
                    acked += 1
            seen += len(batch)
    _err.print(f"received {seen} messages, acknowledged {acked}")


def _print(msg: Message, dropped: bool) -> None:
    value = escape(msg.value.decode(errors="replace")) if msg.value is not None else "(null)"
    again = f" [yellow]redelivery {msg.redelivery_count}[/]" if msg.redelivery_count else ""
    dropped_note = " [red]left unacknowledged[/]" if dropped else ""
    _out.print(f"{msg.partition}:{msg.offset} {value}{again}{dropped_note}")


def register(app: typer.Typer) -> None:
    app.command("consume")(consume)
