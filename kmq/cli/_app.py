"""The Typer application and its command registry.

Commands of `tracker/` and `api/` arrive through the `kmq.commands` entry-point group, so `kmq` never imports
them (dependencies point one way: they import kmq). Installed without their extra, they load as a command that says
which `pip install` adds it.
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import EntryPoint, entry_points
from typing import Annotated, Any

import typer

from kmq.cli.errors import fail
from kmq.errors import MissingExtraError

app = typer.Typer(
    name="kmq",
    help="Kafka work queues with individual acknowledgement and redelivery.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

_BUILTIN = (
    "kmq.cli.broker",
    "kmq.cli.topics",
    "kmq.cli.send",
    "kmq.cli.consume",
    "kmq.cli.demo",
    "kmq.cli.bench",
    "kmq.cli.worker",
    "kmq.cli.dlq",
    "kmq.cli.audit",
)
_log = logging.getLogger(__name__)
_registered = False


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"kmq {version()}")
        raise typer.Exit


@app.callback()
def _kmq(
    _version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Kafka work queues with individual acknowledgement and redelivery."""


def version() -> str:
    """The installed distribution's version: pyproject.toml's, the one place it is written."""
    from importlib.metadata import version as distribution_version

    return distribution_version("kmq")


def _register_all() -> None:
    global _registered
    if _registered:
        return
    _registered = True
    for module in _BUILTIN:
        importlib.import_module(module).register(app)
    for entry in entry_points(group="kmq.commands"):
        _register_entry(entry)


def _register_entry(entry: EntryPoint) -> None:
    try:
        register = entry.load()
    except MissingExtraError as e:
        _register_missing(entry.name, MissingExtraError(f"kmq {entry.name}", e.extras, e.missing))
        return
    register(app)


def _register_missing(name: str, error: MissingExtraError) -> None:
    """`kmq NAME ...` (even `--help`) fails with the error that names the install command."""

    def missing(_args: Annotated[list[str] | None, typer.Argument(hidden=True)] = None) -> None:
        raise fail(str(error))

    settings: dict[str, Any] = {"ignore_unknown_options": True, "allow_extra_args": True}
    app.command(name, help=str(error), add_help_option=False, context_settings=settings)(missing)


def main() -> None:
    """Console-script entry point."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Connection retries are librdkafka's business; the commands report what failed in one line.
    logging.getLogger("kmq.kafka").setLevel(logging.CRITICAL)
    _register_all()
    app()
