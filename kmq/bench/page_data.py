"""A stored run (`kmq bench --json`) read back: its table rows, and the lines that say how and where it was measured."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from kmq.bench.results import Row
from kmq.errors import BenchError

MB = 1_000_000
_TEXT_FIELDS = {f.name for f in dataclasses.fields(Row) if f.type in ("str", str)}


def load(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BenchError(f"cannot read the run in {path}: {e}") from e
    missing = [key for key in ("command", "machine", "options", "contenders", "targets") if key not in data]
    if missing:
        raise BenchError(f"{path} is not a run `kmq bench --json` wrote (no {', '.join(missing)})")
    return data


def rows_of(data: dict[str, Any]) -> list[Row]:
    """The table rows as the run's JSON has them (null: not measured, NaN again)."""
    return [_row(contender) for contender in data["contenders"]]


def options_line(data: dict[str, Any]) -> str:
    options = data["options"]
    work = ", ".join(f"{us} µs" for us in options["work_us"])
    warm_up = " after one warm-up round (not counted)" if options.get("warm_up") else ""
    messages = f"{options['messages']:,}".replace(",", " ")
    return (
        f"{messages} messages of {options['size']} B on {options['partitions']} partitions, batches of "
        f"{options['batch']}, medians of {options['repeat']} alternating rounds{warm_up}. Handler work per "
        f"message: {work} (a row `name@20us` ran with 20 µs; its ÷ plain is ÷ `plain@20us`)."
    )


def machine_line(machine: dict[str, Any]) -> str:
    """Where and on what the run measured (every field optional: older runs lack some)."""
    commit = machine.get("git_commit")
    code = f"commit `{commit[:12]}`" if commit else "an unknown commit"
    code += " with local changes" if machine.get("git_dirty") else ""
    versions = [
        f"{name} {machine[key]}"
        for name, key in (("Python", "python"), ("confluent-kafka", "confluent_kafka"), ("librdkafka", "librdkafka"))
        if machine.get(key)
    ]
    broker = machine.get("broker_version") or machine.get("broker", "an unknown broker")
    load = _load(machine.get("load_average_start"), machine.get("load_average_end"))
    return (
        f"Measured at {code} on {machine.get('cpu', 'an unknown CPU')}, {machine.get('cores', '?')} cores, "
        f"{machine.get('memory_gb', '?')} GB, {machine.get('os', '')}; {', '.join(versions)}; broker: {broker} "
        f"({machine.get('broker', '')}), on the same cores.{load}"
    )


def _load(start: list[float] | None, end: list[float] | None) -> str:
    if not start or not end:
        return ""
    return f" Load average (1, 5, 15 min): {_triple(start)} at the start, {_triple(end)} at the end."


def _triple(values: list[float]) -> str:
    return " / ".join(f"{value:.2f}" for value in values)


def _row(contender: dict[str, Any]) -> Row:
    values: dict[str, Any] = {}
    for field in dataclasses.fields(Row):
        value = contender.get(field.name)
        if field.name in _TEXT_FIELDS:
            values[field.name] = "" if value is None else str(value)
        elif field.name == "runs":
            values[field.name] = int(value or 0)
        else:
            values[field.name] = math.nan if value is None else float(value)
    return Row(**values)
