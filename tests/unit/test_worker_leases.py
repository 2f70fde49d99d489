"""The worker's lease schedule: which leases to extend and which expire, on an explicit clock."""

from __future__ import annotations

import weakref

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmq.message import Message
from kmq.worker.leases import LeaseSchedule, lease_key, lease_keys


def schedule(max_processing_ms: int = 10_000) -> LeaseSchedule[int, str]:
    return LeaseSchedule(margin_ms=1_000, extension_ms=3_000, max_processing_ms=max_processing_ms, keys_of=keys_of)


def test_nothing_is_due_before_the_margin() -> None:
    leases = schedule()
    leases.add(1, "a", received_ms=0, deadline_ms=3_000)
    assert leases.next_due_ms() == 2_000
    due = leases.due(1_999)
    assert (due.extend, due.expired) == ([], [])


def test_a_lease_near_its_deadline_is_extended_from_now() -> None:
    leases = schedule()
    leases.add(1, "a", received_ms=0, deadline_ms=3_000)
    due = leases.due(2_000)
    assert due.extend == [("a", 3_000)]
    # the new deadline is now + 3 000: due again at 4 000
    assert leases.next_due_ms() == 4_000
    assert leases.due(3_999).extend == []


def test_removed_leases_are_never_extended() -> None:
    leases = schedule()
    leases.add(1, "a", 0, 3_000)
    leases.add(2, "b", 0, 3_000)
    assert leases.remove(1)
    assert not leases.remove(1)
    assert leases.due(2_500).extend == [("b", 3_000)]


def test_the_last_extension_stops_at_the_maximum_processing_time_then_it_expires() -> None:
    leases = schedule(max_processing_ms=7_000)
    leases.add(1, "a", 0, 3_000)
    assert leases.due(2_000).extend == [("a", 3_000)]  # deadline 5 000
    assert leases.due(4_000).extend == [("a", 3_000)]  # 3 000 left before 7 000: deadline 7 000
    due = leases.due(6_000)  # 1 000 left: no more extension
    assert (due.extend, due.expired) == ([], ["a"])
    assert len(leases) == 0 and 1 not in leases
    assert not leases.remove(1)


def test_an_extension_shorter_than_the_margin_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than the margin"):
        LeaseSchedule[int, str](margin_ms=1_000, extension_ms=1_000, max_processing_ms=10_000)


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5_000), st.booleans()), max_size=60))
def test_every_lease_held_past_its_margin_is_either_extended_or_expired(
    ops: list[tuple[int, int, bool]],
) -> None:
    leases = schedule(max_processing_ms=6_000)
    deadlines: dict[int, int] = {}
    now = 0
    for key, step, remove in ops:
        now += step // 10
        if remove:
            assert leases.remove(key) == (key in deadlines)
            deadlines.pop(key, None)
        elif key not in deadlines:
            leases.add(key, str(key), now, now + 3_000)
            deadlines[key] = now + 3_000
        due = leases.due(now)
        for item, timeout_ms in due.extend:
            assert timeout_ms > 1_000
            deadlines[int(item)] = now + timeout_ms
        for item in due.expired:
            del deadlines[int(item)]
        # invariant: nothing still held is within the margin of its deadline
        assert all(deadline - now > 1_000 for deadline in deadlines.values())
        assert len(leases) == len(deadlines)


class Job:
    """An item a weak reference can follow (to see whether the schedule still holds it)."""


def test_a_batch_whose_leases_are_all_removed_is_let_go_at_once() -> None:
    leases: LeaseSchedule[int, Job] = schedule()
    jobs = [Job() for _ in range(3)]
    alive = [weakref.ref(job) for job in jobs]
    leases.add_all([1, 2, 3], jobs, received_ms=0, deadline_ms=30_000)
    del jobs
    assert leases.remove_all([1, 3, 9]) == [1, 1, None]  # held ones give their entry's number; 9 was never held
    assert all(ref() is not None for ref in alive)  # one lease of the batch is still held: the batch is kept
    assert leases.remove(2)
    assert [ref() for ref in alive] == [None, None, None]  # long before the deadline, with no collection needed
    assert leases.next_due_ms() is None and leases.items() == []


def test_a_key_added_again_is_scheduled_by_its_newest_lease_alone() -> None:
    leases = schedule()
    leases.add(1, "first", received_ms=0, deadline_ms=3_000)
    leases.add(1, "again", received_ms=1_500, deadline_ms=4_500)
    assert leases.items() == ["again"]
    assert leases.due(2_000).extend == []  # the first lease's deadline passes unnoticed: it was replaced
    assert leases.due(3_500).extend == [("again", 3_000)]
    assert leases.remove(1) and len(leases) == 0


def test_a_batch_removed_in_one_call_is_let_go_too() -> None:
    leases: LeaseSchedule[int, Job] = schedule()
    jobs = [Job(), Job()]
    alive = [weakref.ref(job) for job in jobs]
    leases.add_all([1, 2], jobs, received_ms=0, deadline_ms=30_000)
    leases.add(3, Job(), received_ms=0, deadline_ms=30_000)
    del jobs
    assert leases.remove_all([1, 2]) == [1, 1]
    assert [ref() for ref in alive] == [None, None]
    assert len(leases) == 1 and 3 in leases


@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=20))
def test_a_batchs_lease_keys_are_each_messages_own_and_distinct_messages_never_share_one(
    positions: list[tuple[int, int]],
) -> None:
    messages = [Message(b"", None, "jobs", partition, offset, 0, 0, 0) for partition, offset in positions]
    keys = lease_keys(messages)
    assert keys == [lease_key(msg) for msg in messages]
    assert len(set(keys)) == len(set(positions))


def keys_of(items: list[str]) -> list[int]:
    """A run's keys, as `lease_keys` gives a worker's: here the items' ordinals."""
    return [ord(item) for item in items]


def run_of(leases: LeaseSchedule[int, str], items: str, deadline_ms: int = 3_000) -> int:
    return leases.add_run(list(items), received_ms=0, deadline_ms=deadline_ms)


def test_a_run_is_leased_as_a_whole_and_forgotten_once_settled() -> None:
    leases = schedule()
    run = run_of(leases, "abcd")
    assert len(leases) == 4 and leases.held == {}  # no key per message
    assert leases.settle_run(run, 3) and leases.run_held(run) and len(leases) == 1
    assert leases.settle_run(run, 1) and not leases.run_held(run) and len(leases) == 0
    assert leases.next_due_ms() is None and leases.due(10_000).extend == []


def test_a_runs_unsettled_rest_is_extended_as_keyed_leases_and_settles_by_key_from_then_on() -> None:
    # given a run of 4 of which 2 are settled
    leases = schedule()
    run = run_of(leases, "abcd")
    leases.settle_run(run, 2)
    # when its deadline nears
    due = leases.due(2_000)
    # then the other 2 are extended, and keyed from now on: the run is no run any more
    assert due.extend == [("c", 3_000), ("d", 3_000)]
    assert not leases.run_held(run) and not leases.settle_run(run, 1)
    assert set(leases.held) == {ord("c"), ord("d")} and len(leases) == 2
    assert leases.remove_all([ord("c"), ord("d")]) != [None, None] and len(leases) == 0


def test_removing_a_key_of_a_run_keys_its_rest_and_removes_that_one() -> None:
    # (a handler of the run raised: its message is settled on its own)
    leases = schedule()
    other = run_of(leases, "xy")
    run = run_of(leases, "abc")
    leases.settle_run(run, 1)
    assert leases.remove(ord("b"))
    assert not leases.remove(ord("a"))  # settled with the run's first
    assert set(leases.held) == {ord("c"), ord("x"), ord("y")} and len(leases) == 3
    assert not leases.run_held(other)
    assert leases.remove_all([ord("c"), ord("x")]) == [run, other]


def test_the_items_of_a_run_are_its_unsettled_ones_and_a_keyed_lease_beside_it_is_unaffected() -> None:
    leases = schedule()
    leases.add(1, "k", 0, 3_000)
    run = run_of(leases, "abc")
    leases.settle_run(run, 1)
    assert sorted(leases.items()) == ["b", "c", "k"]
    leases.unrun(run)  # (done already by items(): a second time changes nothing)
    assert len(leases) == 3 and 1 in leases


def test_a_failure_counted_off_its_run_leaves_a_lease_of_the_same_key_held_elsewhere_alone() -> None:
    # (the worker settles a run's failed message with `settle_run`, not by key: the same offset received again while
    # its first copy runs holds that key under another lease, which a removal by key would take instead)
    leases = schedule()
    leases.add(ord("b"), "old b", 0, 3_000)
    run = run_of(leases, "abcd")
    assert leases.settle_run(run, 1) and leases.settle_run(run, 1)  # a ran, then b raised
    assert leases.settle_run(run, 2) and not leases.run_held(run)  # c and d ran: the run is settled
    assert len(leases) == 1 and leases.due(2_000).extend == [("old b", 3_000)]


def test_looking_a_key_up_keys_no_run() -> None:
    leases = schedule()
    run = run_of(leases, "ab")
    assert ord("b") in leases and ord("z") not in leases
    assert leases.run_held(run) and leases.held == {}
