"""The benchmark page's figures from one stored run: `python -m kmq.bench.page docs/benchmarks/latest.json`.

It rewrites the generated part of docs/benchmarks.md (between the two marker comments) from the JSON that
`kmq bench --json` wrote: the contenders' medians, the targets, the command, the commit and the machine; and draws
the plot from the same JSON (`--plot`, matplotlib from the `bench` extra). A unit test renders the part again and
fails when the page differs, so the page always shows the stored run.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kmq.bench.page_data import MB, load, machine_line, options_line, rows_of
from kmq.bench.results import Row
from kmq.errors import BenchError

COMMAND = "python -m kmq.bench.page docs/benchmarks/latest.json"
START = f"<!-- bench-page:start (generated: {COMMAND}) -->"
END = "<!-- bench-page:end -->"
PLOT = "images/benchmarks.png"  # beside the page, under docs/
TRACKER_CPU = "tracker_cpu_us_per_msg"  # a contender's tracker's CPU per message, when the run measured it


def render(data: dict[str, Any]) -> str:
    """The generated part of the page (without its marker lines)."""
    rows = rows_of(data)
    parts = [
        options_line(data),
        "",
        *_contenders_table(rows, data),
        "",
        "Targets (each ratio is the median of the ratios within a round):",
        "",
        *_targets_table(data["targets"]),
        "",
        f"![Throughput and latency of each contender, from the same run]({PLOT})",
        "",
        "Command:",
        "",
        "```bash",
        data["command"],
        "```",
        "",
        machine_line(data["machine"]),
    ]
    return "\n".join(parts)


def replace_section(page: str, section: str) -> str:
    """`page` with the text between its markers replaced by `section`."""
    before, start, rest = page.partition(START)
    _, end, after = rest.partition(END)
    if not start or not end:
        raise BenchError(f"the page has no generated section: put the lines {START!r} and {END!r} in it")
    return f"{before}{START}\n{section}\n{END}{after}"


def section_of(page: str) -> str:
    """The text a page has between its markers (what `render` made, when the page is up to date)."""
    _, _, rest = page.partition(START)
    return rest.partition(END)[0].strip("\n")


def _contenders_table(rows: Sequence[Row], data: dict[str, Any]) -> list[str]:
    tracker_cpu = {c["contender"]: c.get(TRACKER_CPU) for c in data["contenders"]}
    with_tracker = any(isinstance(v, int | float) for v in tracker_cpu.values())
    header = ["contender", "throughput", "÷ plain", "CPU µs/msg"]
    header += ["tracker CPU µs/msg"] if with_tracker else []
    header += ["latency", "p50 ms", "p95 ms", "p99 ms", "RSS MB", "runs"]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if h in ("contender", "latency") else "---:" for h in header) + "|",
    ]
    for row in rows:
        cells = [f"`{row.contender}`", _rate(row), _fixed(row.ratio_to_plain, 2), _fixed(row.cpu_us_per_msg, 1)]
        cells += [_fixed(_float(tracker_cpu.get(row.contender)), 1)] if with_tracker else []
        cells += [row.latency if not math.isnan(row.p99_ms) else "—"]
        cells += [_fixed(value, 2) for value in (row.p50_ms, row.p95_ms, row.p99_ms)]
        cells += [_fixed(row.rss_bytes / MB, 0), str(row.runs) if not row.note else f"{row.runs} ({row.note})"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _targets_table(targets: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| goal | measured | status |", "|---|---:|---|"]
    for target in targets:
        limit = f"{target['comparison'].replace('>=', '≥').replace('<=', '≤')} {_limit(target['limit'])}"
        unit = "" if target["unit"] == "x" else f" {target['unit']}"
        status = f"**{target['status']}**" if target["status"] == "missed" else target["status"]
        measured = _float(target["measured"])
        shown = "—" if math.isnan(measured) else f"{_measured(measured, target['unit'])}{unit}"
        lines.append(f"| {target['name']} {limit}{unit} | {shown} | {status} |")
    return lines


def _rate(row: Row) -> str:
    return "—" if math.isnan(row.rate) else f"{_thousands(row.rate)} {row.rate_unit}"


def _thousands(value: float) -> str:
    return f"{value:,.0f}".replace(",", " ")


def _limit(value: float) -> str:
    return _thousands(value) if value >= 1000 else f"{value:g}"


def _measured(value: float, unit: str) -> str:
    return _thousands(value) if abs(value) >= 1000 or unit in ("msgs/s", "offsets/s") else f"{value:.2f}"


def _fixed(value: float, decimals: int) -> str:
    return "—" if math.isnan(value) else f"{value:.{decimals}f}"


def _float(value: object) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def write(json_path: Path, page_path: Path, plot_path: Path | None) -> None:
    """Rewrite the page's generated part from the run in `json_path`, and draw its plot (unless `plot_path` is None)."""
    data = load(json_path)
    page_path.write_text(replace_section(page_path.read_text(encoding="utf-8"), render(data)), encoding="utf-8")
    if plot_path is not None:
        from kmq.bench.plot import draw, title

        options = data["options"]
        sizes = (options[name] for name in ("messages", "size", "partitions", "batch", "repeat"))
        draw(rows_of(data), title(data["machine"]["broker"], *sizes), plot_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kmq.bench.page", description=__doc__.split("\n\n")[0])
    parser.add_argument("json", type=Path, help="the run, as `kmq bench --json` wrote it")
    parser.add_argument("--page", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--plot", type=Path, default=Path("docs") / PLOT, help="where the plot goes")
    parser.add_argument("--no-plot", action="store_true", help="rewrite the page only")
    args = parser.parse_args(argv)
    try:
        write(args.json, args.page, None if args.no_plot else args.plot)
    except (OSError, BenchError) as e:
        sys.stderr.write(f"{e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
