"""The runner's bookkeeping without a broker: alternation, skipped contenders, and which failures end the bench."""

from __future__ import annotations

from typing import Any

import pytest

from kmq.bench import runner
from kmq.bench.display import Silent
from kmq.bench.options import HTTP, KMQ, PLAIN, SHARE, WARM_UP_ROUND, BenchOptions
from kmq.bench.protocol import SHARE_UNAVAILABLE
from kmq.errors import BenchError


class FakeCluster:
    backend = "external"


def fake_measure(failures: dict[str, str]) -> Any:
    calls: list[tuple[str, int]] = []

    def measure(cluster: Any, options: BenchOptions, name: str, round_: int, display: Any) -> dict[str, Any]:
        calls.append((name, round_))
        if name in failures:
            raise BenchError(failures[name])
        return {"msgs_per_s": 100.0 * (round_ + 1)}

    measure.calls = calls  # type: ignore[attr-defined]
    return measure


def test_a_cluster_without_share_groups_skips_share_once_and_measures_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    measure = fake_measure({SHARE: f"share worker: ERROR BenchError: {SHARE_UNAVAILABLE}: no record came back"})
    monkeypatch.setattr(runner, "_measure", measure)
    options = BenchOptions(contenders=(PLAIN, KMQ, SHARE), repeat=2, warm_up=False)

    runs, notes = runner._run_all(FakeCluster(), options, Silent())  # type: ignore[arg-type]

    assert [(r.round, r.contender) for r in runs] == options.schedule
    assert measure.calls == [(PLAIN, 0), (KMQ, 0), (SHARE, 0), (KMQ, 1), (PLAIN, 1)]  # share is not tried again
    assert all(r.skipped for r in runs if r.contender == SHARE)
    assert SHARE_UNAVAILABLE in notes[SHARE]


def test_any_other_failure_ends_the_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_measure", fake_measure({SHARE: "share worker: ERROR ValueError: bad setting"}))
    with pytest.raises(BenchError, match="bad setting"):
        runner._run_all(FakeCluster(), BenchOptions(contenders=(SHARE,)), Silent())  # type: ignore[arg-type]
    monkeypatch.setattr(runner, "_measure", fake_measure({KMQ: "kmq worker went silent"}))
    with pytest.raises(BenchError, match="silent"):
        runner._run_all(FakeCluster(), BenchOptions(contenders=(PLAIN, KMQ)), Silent())  # type: ignore[arg-type]


def test_contenders_a_broker_cannot_host_are_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    measure = fake_measure({})
    monkeypatch.setattr(runner, "_measure", measure)
    mock = FakeCluster()
    mock.backend = "mock"

    runs, notes = runner._run_all(mock, BenchOptions(contenders=(PLAIN, HTTP), repeat=1, warm_up=False), Silent())  # type: ignore[arg-type]

    assert measure.calls == [(PLAIN, 0)]
    assert runs[1].skipped == notes[HTTP] and "CreateTopics" in notes[HTTP]


def test_every_contender_warms_up_once_before_the_measured_rounds_and_is_not_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    measure = fake_measure({SHARE: f"share worker: ERROR BenchError: {SHARE_UNAVAILABLE}: no record came back"})
    monkeypatch.setattr(runner, "_measure", measure)
    options = BenchOptions(contenders=(PLAIN, KMQ, SHARE), repeat=2)

    runs, notes = runner._run_all(FakeCluster(), options, Silent())  # type: ignore[arg-type]

    warm_up = [(PLAIN, WARM_UP_ROUND), (KMQ, WARM_UP_ROUND), (SHARE, WARM_UP_ROUND)]
    assert measure.calls == [*warm_up, (PLAIN, 0), (KMQ, 0), (KMQ, 1), (PLAIN, 1)]  # share: unavailable, found once
    assert [(r.round, r.contender) for r in runs] == options.schedule  # the warm-up is in no run, no median
    assert SHARE_UNAVAILABLE in notes[SHARE]
