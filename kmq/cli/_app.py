"""The Typer application and its command registry.

Commands of `tracker/` and `api/` arrive through the `kmq.commands` entry-point group, so `kmq` never imports
them (dependencies point one way: they import kmq).
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points

import typer

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


def _register_all() -> None:
    global _registered
    if _registered:
        return
    _registered = True
    for module in _BUILTIN:
        importlib.import_module(module).register(app)
    for entry in entry_points(group="kmq.commands"):
        entry.load()(app)


def main() -> None:
    """Console-script entry point."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Connection retries are librdkafka's business; the commands report what failed in one line.
    logging.getLogger("kmq.kafka").setLevel(logging.CRITICAL)
    _register_all()
    app()
