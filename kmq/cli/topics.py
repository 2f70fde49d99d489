"""`kmq topics create|check`."""

from __future__ import annotations

from typing import Annotated

import typer

from kmq.admin import check_topics, ensure_topics, grow_topics, replication
from kmq.cli.console import OutputConsole
from kmq.cli.errors import friendly_errors
from kmq.cli.options import BootstrapOption, QueueOption, build_config

topics = typer.Typer(help="Create or check a queue's topics (queue, markers, dead letters).", no_args_is_help=True)
_console = OutputConsole()
_err = OutputConsole(stderr=True)


@topics.command("create")
@friendly_errors
def create(
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1, help="partitions of queue and markers")] = 8,
    replication_factor: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="replicas of each partition (default: min(3, brokers); markers and dead letters follow an existing "
            "queue); with 2 or more, min.insync.replicas is set to 2",
        ),
    ] = None,
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
    """Check that the markers topic has exactly the queue's partition count, and warn when a broker's loss could lose
    acknowledged markers or messages (one replica on a multi-broker cluster, min.insync.replicas 1)."""
    config = build_config(bootstrap_servers, queue)
    partitions = check_topics(config)
    _console.print(f"ok: {config.queue_topic} and {config.markers_topic} both have {partitions} partitions")
    for topic in replication(config):
        warning = topic.warning()
        if warning is None:
            replicas, isr = topic.replication_factor, topic.min_insync_replicas
            _console.print(f"ok: {topic.topic} has {replicas} replicas, min.insync.replicas={isr}")
        else:
            _err.print(f"warning: {warning}")


def register(app: typer.Typer) -> None:
    app.add_typer(topics, name="topics")
