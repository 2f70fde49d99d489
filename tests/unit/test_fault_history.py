"""The fault tests' history checker (tests/faults/history.py): what it calls lost, duplicated, explained, resumed."""

from __future__ import annotations

from pathlib import Path

from tests.faults.history import Event, History, Recorder

FAULT = (100.0, 120.0)


def ev(
    kind: str, n: int, t: float, by: str = "w1", partition: int = 0, offset: int = -1, deadline: float = 0.0
) -> Event:
    return Event(kind, n, t, by, partition, offset, deadline)


def delivered(n: int, t: float, offset: int, by: str = "w1", deadline: float = 1e9, ack: bool = True) -> list[Event]:
    """One hand-out of message n at offset `offset`, its run, and (unless `ack` is False) its confirmed ack."""
    events = [ev("handout", n, t, by, 0, offset, deadline), ev("run", n, t + 0.1, by)]
    return events + ([ev("ack", n, t + 0.2, by, deadline=deadline)] if ack else [])


def test_a_clean_run_has_nothing_lost_or_duplicated() -> None:
    verdict = History([ev("send", 1, 1.0), ev("send", 2, 1.0), *delivered(1, 2.0, 0), *delivered(2, 130.0, 1)]).check(
        range(1, 10), *FAULT
    )
    assert (verdict.sent, verdict.acked, verdict.lost, verdict.duplicates) == (2, 2, [], 0)
    assert verdict.after_ack == []
    assert verdict.resume_s is not None and abs(verdict.resume_s - 10.2) < 1e-9


def test_a_confirmed_send_never_acked_is_lost_and_an_unconfirmed_one_is_not_counted() -> None:
    verdict = History([ev("send", 1, 1.0), ev("send", 2, 1.0), *delivered(1, 2.0, 0), *delivered(3, 2.0, 5)]).check(
        range(1, 10), *FAULT
    )
    assert verdict.lost == [2]
    assert (verdict.sent, verdict.acked) == (2, 1)


def test_an_ack_that_failed_leaves_the_message_lost_until_a_redelivery_is_acked() -> None:
    first = delivered(1, 2.0, 0, ack=False)
    assert History([ev("send", 1, 1.0), *first]).check(range(1, 2), *FAULT).lost == [1]
    copy = delivered(1, 20.0, 7)  # the tracker's copy, at another offset
    verdict = History([ev("send", 1, 1.0), *first, *copy]).check(range(1, 2), *FAULT)
    assert verdict.lost == [] and verdict.duplicates == 1 and verdict.after_ack == []


def test_a_run_after_a_confirmed_ack_is_unexplained_without_a_late_ack_or_a_re_read_in_the_fault() -> None:
    verdict = History([ev("send", 1, 1.0), *delivered(1, 2.0, 0), *delivered(1, 30.0, 7)]).check(range(1, 2), *FAULT)
    assert [a.why for a in verdict.unexplained] == ["unexplained"]
    assert verdict.duplicates == 1


def test_an_ack_confirmed_after_its_deadline_explains_the_redelivery() -> None:
    late = delivered(1, 2.0, 0, deadline=2.1)  # acked at 2.2, after the deadline: the tracker may have copied it
    verdict = History([ev("send", 1, 1.0), *late, *delivered(1, 30.0, 7)]).check(range(1, 2), *FAULT)
    assert verdict.counts() == {"late": 1}
    assert verdict.unexplained == []


def test_a_copy_of_a_hand_out_that_expired_before_any_ack_is_explained_even_when_recorded_late() -> None:
    # The facade handed the message out with a deadline of 14 and answered (recorded) only at 29, after the fault;
    # meanwhile w2 re-read and acked it at 26.2, then ran the tracker's copy made when the facade's lease expired.
    events = [
        ev("send", 1, 1.0),
        *delivered(1, 26.0, 0, by="w2", deadline=36.0),
        *delivered(1, 26.3, 7, by="w2", deadline=36.3),
        *delivered(1, 29.0, 0, by="http", deadline=14.0),
    ]
    verdict = History(events).check(range(1, 2), 5.0, 25.0)
    assert verdict.counts() == {"expired": 1, "reread": 1}
    assert verdict.unexplained == []
    # but a hand-out whose deadline came only after the first ack explains nothing
    on_time = [*events[:-3], *delivered(1, 29.0, 0, by="http", deadline=26.25)]
    assert History(on_time).check(range(1, 2), 5.0, 25.0).counts() == {"unexplained": 1, "reread": 1}


def test_a_re_read_of_the_same_record_is_explained_only_from_the_faults_start() -> None:
    during = History([ev("send", 1, 1.0), *delivered(1, 2.0, 0), *delivered(1, 105.0, 0, by="w2")])
    assert during.check(range(1, 2), *FAULT).counts() == {"reread": 1}
    before = History([ev("send", 1, 1.0), *delivered(1, 2.0, 0), *delivered(1, 50.0, 0, by="w2")])
    assert before.check(range(1, 2), *FAULT).counts() == {"unexplained": 1}


def test_only_the_faults_numbers_are_judged_and_no_ack_after_the_fault_means_no_resume() -> None:
    verdict = History([ev("send", 1, 1.0), *delivered(1, 2.0, 0), ev("send", 50, 1.0)]).check(range(1, 10), *FAULT)
    assert (verdict.sent, verdict.lost, verdict.resume_s) == (1, [], None)


def test_recorders_write_lines_that_load_back_in_time_order_and_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    one, two = Recorder(tmp_path / "a.history", "a"), Recorder(tmp_path / "b.history", "b")
    one.record("send", 1)
    two.record("handout", 1, partition=2, offset=9, deadline=5.0)
    one.record("run", 1)
    one.close()
    two.close()
    with (tmp_path / "b.history").open("a") as torn:
        torn.write('{"kind": "ack", "n"')
    history = History.load(sorted(tmp_path.glob("*.history")))
    assert [(e.kind, e.by) for e in history.events] == [("send", "a"), ("handout", "b"), ("run", "a")]
    assert (history.events[1].partition, history.events[1].offset) == (2, 9)


def test_each_client_that_worked_before_the_faults_end_must_ack_again_after_it() -> None:
    events = [ev("send", n, 1.0) for n in (1, 2, 3)]
    events += [*delivered(1, 50.0, 0, by="w1"), *delivered(2, 60.0, 1, by="w2"), *delivered(3, 125.0, 2, by="w1")]
    verdict = History(sorted(events, key=lambda e: e.t)).check(range(1, 10), *FAULT)
    assert verdict.resume_by == {"w1": 125.2 - FAULT[1], "w2": None}
    assert verdict.not_resumed == ["w2"]
