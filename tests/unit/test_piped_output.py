"""The commands' output piped to a file: lines as long as their text (not wrapped at 80 columns) and no colour
codes, for the demo's progress lines and summary, and the bench's progress lines and tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Run with stdout and stderr on pipes, as `scripts/demo > file` or `kmq bench | tee` would.
SCRIPT = """
from kmq.bench.progress import RichDisplay
from kmq.bench.results import Run
from kmq.bench.table import print_report
from kmq.cli.console import OutputConsole
from kmq.demo.display import LiveProgress, summary
from kmq.demo.tally import Tally, Verdict
from tests.unit.test_bench_output import made_up_report

tally = Tally(originals=set(range(2_000_000)), redelivered=1_234_567, processed=set(range(1_999_000)))
tally.dead = {n: "poison" for n in range(1_999_000, 2_000_000)}
console = OutputConsole(soft_wrap=False)
with LiveProgress(console, expected=2_000_000) as live:
    live.update(2_000_000, tally, "tracker-0: partitions 0-3 · tracker-1: partitions 4-7 · api: serving 8 partitions")
verdict = Verdict(2_000_000, 2_000_000, 1_999_000, 12_345, 1_234_567, 1_000, (("poison", 1_000),), 0, ())
console.print(summary(verdict, 123.4))
print_report(made_up_report(), console)
figures = {"receive_ack_msgs_per_s": 7_000_000, "ack_ms_p50": 10.0, "ack_ms_p95": 123456.78, "ack_ms_p99": 30.0}
with RichDisplay(OutputConsole(stderr=True, soft_wrap=False)) as display:
    display.begin(1)
    display.run_finished(Run("http", 0, figures))
"""
COUNTERS = "sent 2,000,000 · processed 1,999,000 · in flight 0 · redelivered 1,234,567 · dead-lettered 1,000"


@pytest.fixture(scope="module")
def piped() -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


def test_progress_lines_and_tables_do_not_wrap_when_piped(piped: subprocess.CompletedProcess[str]) -> None:
    done = piped
    lines = done.stdout.splitlines()
    assert COUNTERS in lines, done.stdout  # one line, whole: not "dead-lettered \\n1,000"
    assert any(line.startswith("tracker-0: ") and line.endswith("serving 8 partitions") for line in lines)
    assert any(line.split() == ["dead-lettered", "1,000", "(1000", "poison)"] for line in lines), done.stdout
    assert max(len(line) for line in lines) > 80, "the made-up lines are longer than the 80 columns rich assumes"
    (headline,) = [line for line in done.stderr.splitlines() if line.startswith("http #1: ")]
    assert headline.endswith("p95 123456.78 ms"), done.stderr


def test_no_colour_codes_when_piped(piped: subprocess.CompletedProcess[str]) -> None:
    assert "\x1b[" not in piped.stdout and "\x1b[" not in piped.stderr
