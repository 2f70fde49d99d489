"""The PendingSet benchmark: it runs in a fresh interpreter and the memory budget of the tracker holds."""

from __future__ import annotations

import pytest

from kmq_tracker.bench_pending import main, run

# The tracker's budget is 1 M pending messages in 150 MB; 100 000 keeps this test to a couple of seconds.
_COUNT = 100_000
_BUDGET_BYTES_PER_PENDING = 150


def test_memory_per_pending_message_is_within_budget() -> None:
    figures = run(_COUNT)

    assert figures["count"] == _COUNT
    assert 0 < figures["bytes_per_pending"] <= _BUDGET_BYTES_PER_PENDING
    # 2 markers per message plus one extend per ten messages.
    assert figures["ingest_markers"] == 2 * _COUNT + _COUNT // 10
    assert all(figures[name] > 0 for name in ("build_starts_per_s", "drain_ends_per_s", "ingest_markers_per_s"))


def test_the_command_line_prints_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--count", "2000", "--in-process"])

    out = capsys.readouterr().out
    for name in ("bytes_per_pending", "ingest_markers_per_s", "build_starts_per_s", "due_1000_ms"):
        assert name in out
