"""The soak's bookkeeping (tests/soak/soak.py's Ledger): what it counts as sent, acknowledged and missing."""

from __future__ import annotations

import json
from pathlib import Path

from kmq.config import KmqConfig
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
