"""EndGate: markers wait for their START; `held` names the offset ranges whose START is in flight."""

from __future__ import annotations

from kmq.end_gate import EndGate


def test_held_names_the_open_spans_of_a_partition_in_order_until_each_is_acknowledged() -> None:
    gate = EndGate()
    later = gate.open(1, 20, 29)
    earlier = gate.open(1, 10, 19)
    gate.open(2, 0, 4)

    assert gate.held(1) == [(10, 19), (20, 29)]
    assert gate.held(3) == []
    gate.acked(1, earlier)
    assert gate.held(1) == [(20, 29)]
    gate.acked(1, later)
    assert gate.held(1) == []
    assert gate.held(2) == [(0, 4)]


def test_a_failed_span_stays_held_until_a_later_batch_is_acknowledged_past_it() -> None:
    gate = EndGate()
    failed = gate.open(0, 100, 109)
    gate.failed(failed)
    assert gate.held(0) == [(100, 109)]

    again = gate.open(0, 100, 104)  # read again after the rewind, only partly
    gate.acked(0, again)
    assert gate.held(0) == [(105, 109)]


def test_a_marker_waits_for_its_start_and_runs_once_it_is_acknowledged() -> None:
    gate = EndGate()
    ran: list[int] = []
    span = gate.open(0, 5, 9)
    gate.run(0, 7, ran.append, 7)
    gate.run(0, 10, ran.append, 10)  # outside the span: at once
    assert ran == [10]
    gate.acked(0, span)
    assert ran == [10, 7]
