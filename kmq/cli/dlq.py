"""`kmq dlq list | show | redrive`: the dead letters of a queue, and sending selected ones back to it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kmq.cli.console import OutputConsole
from kmq.cli.errors import fail, friendly_errors
from kmq.cli.options import BootstrapOption, QueueOption, build_config
from kmq.dlq import DeadLetter, DeadLetterFilter, read_dead_letters, redrive

dlq_app = typer.Typer(help="Dead letters: list, show, redrive to the queue.", no_args_is_help=True)
_out = OutputConsole()
_err = OutputConsole(stderr=True)
PROGRESS_FROM = 1_000  # a progress bar for redrives of at least this many

ReasonOption = Annotated[str | None, typer.Option(help="only dead letters whose reason contains this text")]
PartitionOption = Annotated[int | None, typer.Option(min=0, help="only this partition of the dead-letter topic")]
FromOption = Annotated[int | None, typer.Option(min=0, help="first dead-letter offset (inclusive)")]
ToOption = Annotated[int | None, typer.Option(min=0, help="last dead-letter offset (inclusive)")]
OriginOption = Annotated[int | None, typer.Option(min=0, help="only those from this queue partition")]


def _filter(
    reason: str | None,
    partition: int | None,
    from_offset: int | None,
    to_offset: int | None,
    origin_partition: int | None,
    include_redriven: bool = True,
) -> DeadLetterFilter:
    return DeadLetterFilter(reason, partition, from_offset, to_offset, origin_partition, include_redriven)


@dlq_app.command("list")
@friendly_errors
def list_(
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
    reason: ReasonOption = None,
    partition: PartitionOption = None,
    from_offset: FromOption = None,
    to_offset: ToOption = None,
    origin_partition: OriginOption = None,
    pending: Annotated[bool, typer.Option("--pending", help="hide those already redriven")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """List dead letters: reason, origin partition/offset, delivery count, first failure."""
    config = build_config(bootstrap_servers, queue)
    selection = _filter(reason, partition, from_offset, to_offset, origin_partition, not pending)
    found = [dead for dead in read_dead_letters(config) if selection.matches(dead)]
    if as_json:
        for dead in found:
            _out.print(json.dumps(summary(dead)), markup=False)
        return
    table = Table(title=f"{config.dead_letter_topic}: {len(found)} dead letters", title_justify="left")
    for column in ("at", "reason", "origin", "deliveries", "first failure (UTC)", "redriven", "value"):
        table.add_column(column)
    for dead in found:
        row = summary(dead)
        table.add_row(
            f"{dead.partition}:{dead.offset}",
            escape(dead.reason),
            f"{dead.origin_partition}:{dead.origin_offset}",
            str(dead.delivery_count),
            row["first_failure"],
            "yes" if dead.redriven else "",
            escape(_preview(dead.value)),
        )
    _out.print(table)


@dlq_app.command("show")
@friendly_errors
def show(
    partition: Annotated[int, typer.Argument(min=0, help="partition of the dead-letter topic")],
    offset: Annotated[int, typer.Argument(min=0, help="offset in that partition")],
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
) -> None:
    """Everything about one dead letter: reason, origin, headers, key and value."""
    config = build_config(bootstrap_servers, queue)
    found = [d for d in read_dead_letters(config) if (d.partition, d.offset) == (partition, offset)]
    if not found:
        raise fail(f"no dead letter at {config.dead_letter_topic} partition {partition} offset {offset}")
    _out.print(json.dumps(detail(found[0]), indent=2), markup=False)


@dlq_app.command("redrive")
@friendly_errors
def redrive_(
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
    reason: ReasonOption = None,
    partition: PartitionOption = None,
    from_offset: FromOption = None,
    to_offset: ToOption = None,
    origin_partition: OriginOption = None,
    all_: Annotated[bool, typer.Option("--all", help="every dead letter (no filter needed)")] = False,
) -> None:
    """Send selected dead letters back to the queue (original key, value, headers; a fresh delivery count).

    Idempotent: a dead letter already redriven is never sent again."""
    config = build_config(bootstrap_servers, queue)
    selection = _filter(reason, partition, from_offset, to_offset, origin_partition)
    if selection.selects_all and not all_:
        raise fail("select dead letters with a filter (--reason, --partition, --from-offset, ...) or pass --all")
    with Progress(
        TextColumn("redriving"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=_err, transient=True
    ) as bar:
        task = bar.add_task("redrive", total=None, visible=False)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, visible=total >= PROGRESS_FROM)

        result = redrive(config, selection, progress)
    _err.print(
        f"redrove {result.redriven} dead letters to {config.queue_topic}; {result.already} were redriven before "
        f"(skipped){f', {result.foreign} came from other topics (left)' if result.foreign else ''}"
    )


def summary(dead: DeadLetter) -> dict[str, Any]:
    return {
        "partition": dead.partition,
        "offset": dead.offset,
        "reason": dead.reason,
        "origin_topic": dead.origin_topic,
        "origin_partition": dead.origin_partition,
        "origin_offset": dead.origin_offset,
        "delivery_count": dead.delivery_count,
        "first_failure": _time(dead.first_failure_ms),
        "dead_lettered": _time(dead.dead_lettered_ms),
        "redriven": dead.redriven,
    }


def detail(dead: DeadLetter) -> dict[str, Any]:
    return {
        **summary(dead),
        "key": _text(dead.key),
        "value": _text(dead.value),
        "headers": {k: _text(v) for k, v in dead.headers},
    }


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode(errors="replace")


def _preview(data: bytes | None, width: int = 40) -> str:
    text = _text(data) or ""
    return text if len(text) <= width else text[: width - 1] + "…"


def register(app: typer.Typer) -> None:
    app.add_typer(dlq_app, name="dlq")
