"""The soak's bookkeeping (tests/soak/soak.py's Ledger): what it counts as sent, acknowledged and missing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kmq.config import KmqConfig
from tests.soak import soak
from tests.soak.soak import HttpClient, Ledger, Sender


def test_the_ledger_counts_each_number_once_and_finds_what_is_missing(tmp_path: Path) -> None:
    sender = Sender(KmqConfig(bootstrap_servers="127.0.0.1:1", queue_topic="q"))
    http = HttpClient(lambda: [], "q")
    for n in (1, 2, 3, 4, 70_000):
        sender.confirmed.put(n)
    sender.confirmed.put(2)  # a delivery report seen twice counts once
    http.acked.put(1)
    http.acked.put(9)  # acknowledged, its send never confirmed: not missing
    lines = [json.dumps({"kind": "ack", "n": n}) for n in (3, 3)]
    (tmp_path / "w.history").write_text("\n".join(lines) + '\n{"kind": "ack", "n": 4')  # the last line is torn
    ledger = Ledger(tmp_path)
    ledger.update(sender, http)
    assert (ledger.confirmed, ledger.acked) == (5, 3)
    assert ledger.missing() == 3 and list(ledger.missing_numbers()) == [2, 4, 70_000]
    assert ledger.missing(below=10) == 2
    with (tmp_path / "w.history").open("a") as rest:
        rest.write("}\n")  # the torn line completed: read now
    ledger.update(sender, http)
    assert list(ledger.missing_numbers()) == [2, 70_000]


@pytest.mark.parametrize(
    ("with_end", "still_s", "waits_out"),
    [({2, 3}, 0.1, False), ({2}, 0.1, True), ({2, 3}, 60.0, True)],
    ids=["all-ended", "one-not-ended", "never-still-long-enough"],
)
def test_the_drain_stops_waiting_once_every_missing_number_has_an_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_end: set[int], still_s: float, waits_out: bool
) -> None:
    # given 3 numbers confirmed sent and 1 acknowledged, of which the markers topic ENDs `with_end`
    sender = Sender(KmqConfig(bootstrap_servers="127.0.0.1:1", queue_topic="q"))
    http = HttpClient(lambda: [], "q")
    for n in (1, 2, 3):
        sender.confirmed.put(n)
    http.acked.put(1)
    ledger = Ledger(tmp_path)
    looked_up: list[set[int]] = []
    monkeypatch.setattr(soak, "_ended", lambda config, numbers: looked_up.append(numbers) or numbers & with_end)
    monkeypatch.setattr(soak, "TICK_S", 0.01)
    monkeypatch.setattr(soak, "STILL_S", still_s)
    monkeypatch.setattr(soak, "DRAIN_TIMEOUT_S", 3.0)
    # when the queue is drained
    began = time.monotonic()
    missing, ended = soak._drain(sender.config, ledger, lambda: ledger.update(sender, http), lambda line: None)
    took_s = time.monotonic() - began
    # then both missing numbers are told, with those that have an END
    assert (missing, ended) == ({2, 3}, with_end)
    # and the wait ends once each has an END (else it waits out its deadline); each number is looked up once,
    # during the wait or, when they never stood still long enough, at its end
    assert (took_s >= soak.DRAIN_TIMEOUT_S) is waits_out
    assert looked_up == [{2, 3}]
