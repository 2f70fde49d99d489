"""The report as JSON: every figure of every run, the medians, the targets, the machine and the options."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from kmq.bench.runner import BenchReport


def report_dict(report: BenchReport, command: str) -> dict[str, Any]:
    """Plain data: NaN (not measured) becomes null, as JSON has no NaN."""
    data = {
        "command": command,
        "machine": report.machine,
        "options": dataclasses.asdict(report.options),
        "contenders": [dataclasses.asdict(row) for row in report.rows],
        "targets": [{**dataclasses.asdict(t), "status": t.status} for t in report.targets],
        "runs": [dataclasses.asdict(run) for run in report.runs],
        "notes": report.notes,
    }
    cleaned: dict[str, Any] = _no_nan(data)
    return cleaned


def write_json(report: BenchReport, path: Path, command: str) -> None:
    path.write_text(json.dumps(report_dict(report, command), indent=2) + "\n", encoding="utf-8")


def _no_nan(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nan(v) for v in value]
    return value
