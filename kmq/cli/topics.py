"""`kmq topics create|check`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from kmq.admin import check_topics, ensure_topics, grow_topics
from kmq.cli.errors import friendly_errors
from kmq.cli.options import BootstrapOption, QueueOption, build_config

topics = typer.Typer(help="Create or check a queue's topics (queue, markers, dead letters).", no_args_is_help=True)
_console = Console(highlight=False, soft_wrap=True)


@topics.command("create")
@friendly_errors
def create(
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1, help="partitions of queue and markers")] = 8,
    replication_factor: Annotated[int, typer.Option(min=1, help="replicas of each partition")] = 1,
) -> None:
    """Create the queue, markers and dead-letter topics where missing, then check them."""
    config = build_config(bootstrap_servers, queue)
    ensure_topics(config, partitions, replication_factor)
    _console.print(
        f"ok: {config.queue_topic}, {config.markers_topic} ({partitions} partitions each) and "
        f"{config.dead_letter_topic} on {config.bootstrap_servers}"
    )


@topics.command("grow")
@friendly_errors
def grow(
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1, help="new partition count of both")],
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
) -> None:
    """Add partitions to the queue and markers topics together (markers first); running clients and trackers pick
    them up at their next metadata refresh."""
    config = build_config(bootstrap_servers, queue)
    grow_topics(config, partitions)
    _console.print(f"ok: {config.queue_topic} and {config.markers_topic} now have {partitions} partitions each")


@topics.command("check")
@friendly_errors
def check(bootstrap_servers: BootstrapOption = None, queue: QueueOption = None) -> None:
    """Check that the markers topic has exactly the queue's partition count."""
    config = build_config(bootstrap_servers, queue)
    partitions = check_topics(config)
    _console.print(f"ok: {config.queue_topic} and {config.markers_topic} both have {partitions} partitions")


def register(app: typer.Typer) -> None:
    app.add_typer(topics, name="topics")
