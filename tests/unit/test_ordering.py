"""`OrderedLanes`: given messages received, when they start, finish or retry, then what may start next."""

from __future__ import annotations

from collections import Counter, defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from kmq.message import Message
from kmq.worker.ordering import OrderedLanes, Ordering, lane_function


def message(partition: int, offset: int, key: bytes | None) -> Message:
    return Message(b"v", key, "q", partition, offset, 0, 0, 60_000)


def lanes(ordering: Ordering = Ordering.KEY) -> OrderedLanes:
    return OrderedLanes(lane_function(ordering))


def offsets(messages: list[Message]) -> list[int]:
    return [m.offset for m in messages]


def test_messages_of_one_key_start_one_at_a_time_in_offset_order() -> None:
    # given three messages of key a and one of key b on one partition
    order = lanes()
    received = [message(0, 0, b"a"), message(0, 1, b"b"), message(0, 2, b"a"), message(0, 3, b"a")]
    # when they are offered, then the first of each key starts
    assert offsets(order.offer(received, 100)) == [0, 1]
    assert order.waiting == 2 and order.keys_waiting == 1
    # and each of a's finishes starts the next, which waited since it was received
    assert offsets(order.done(received[0], 130)) == [2]
    assert offsets(order.done(received[2], 150)) == [3]
    assert order.done(received[3], 160) == []
    assert order.take_waits_ms() == [30, 50]  # those that waited


def test_one_key_on_two_partitions_is_two_lanes() -> None:
    order = lanes()
    assert offsets(order.offer([message(0, 5, b"a"), message(1, 5, b"a")], 0)) == [5, 5]


def test_messages_without_a_key_are_each_their_own_lane() -> None:
    order = lanes()
    assert offsets(order.offer([message(0, i, None) for i in range(4)], 0)) == [0, 1, 2, 3]


def test_partition_ordering_runs_one_message_of_a_partition_at_a_time() -> None:
    order = lanes(Ordering.PARTITION)
    received = [message(0, 0, b"a"), message(0, 1, b"b"), message(1, 0, None)]
    assert [(m.partition, m.offset) for m in order.offer(received, 0)] == [(0, 0), (1, 0)]
    assert offsets(order.done(received[0], 1)) == [1]


def test_a_retried_head_keeps_its_lane_until_its_time() -> None:
    # given a key with two messages, the first failed and retries at 500
    order = lanes()
    first, second = message(0, 0, b"a"), message(0, 1, b"a")
    order.offer([first, second], 0)
    again = first._replace(redelivery_count=1)
    order.retry(again, 500)
    # then nothing starts before 500, the retry at 500, and the second only once the retry is done
    assert order.due(499) == []
    assert order.due(500) == [again]
    assert order.due(10_000) == []
    assert offsets(order.done(again, 600)) == [1]
    assert order.held == Counter({0: 1})


def test_give_back_takes_waiting_and_retrying_messages_and_leaves_running_ones() -> None:
    # given key a running with one behind it, key b waiting for a retry, key c on another partition
    order = lanes()
    a0, a1, b0, c0, c1 = (
        message(0, 0, b"a"),
        message(0, 1, b"a"),
        message(0, 2, b"b"),
        *[message(1, i, b"c") for i in range(2)],
    )
    order.offer([a0, a1, b0, c0, c1], 0)
    order.retry(b0, 100)
    # when partition 0 is given back
    given = order.give_back({0})
    # then a1 and b0 are, a0 runs on and starts nothing when done; partition 1 is untouched
    assert sorted(offsets(given)) == [1, 2]
    assert order.done(a0, 1) == []
    assert order.due(100) == []
    assert order.held == Counter({1: 2})
    assert order.give_back() == [c1]


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(st.sampled_from([b"a", b"b", b"c", None]), min_size=1, max_size=40),
    choices=st.lists(st.integers(0, 1_000), min_size=200, max_size=200),
    ordering=st.sampled_from([Ordering.KEY, Ordering.PARTITION]),
    let_start=st.booleans(),
)
def test_every_message_runs_once_in_offset_order_per_lane_never_two_at_once(
    keys: list[bytes | None], choices: list[int], ordering: Ordering, let_start: bool
) -> None:
    # given messages over two partitions, offered in batches (their heads let start at once, or not), finishing or
    # retrying in an arbitrary order
    lane_of = lane_function(ordering)
    received = [message(i % 2, i, key) for i, key in enumerate(keys)]
    order = OrderedLanes(lane_of)
    running: dict[tuple[int, int], Message] = {}
    started: defaultdict[object, list[int]] = defaultdict(list)
    finished: list[int] = []
    retries = 0
    now, offered = 0, 0

    def start(messages: list[Message]) -> None:
        for msg in messages:
            lane = lane_of(msg)
            assert all(lane_of(other) != lane for other in running.values()), "two of a lane at once"
            running[(msg.partition, msg.offset)] = msg
            started[lane].append(msg.offset)

    for choice in choices:
        now += 1
        if offered < len(received) and choice % 3 == 0:
            batch = received[offered : offered + 1 + choice % 5]
            offered += len(batch)
            start(order.offer(batch, now, running=let_start))
        elif running:
            msg = running.pop(sorted(running)[choice % len(running)])
            if choice % 7 == 0 and retries < 10:
                retries += 1
                order.retry(msg._replace(redelivery_count=msg.redelivery_count + 1), now + choice % 4)
            else:
                finished.append(msg.offset)
                start(order.done_all([msg], now, running=let_start))
        start(order.due(now))
    # when everything left is offered and run to the end
    start(order.offer(received[offered:], now))
    while running or order.held:
        now += 5
        start(order.due(now))
        for key in sorted(running):
            msg = running.pop(key)
            finished.append(msg.offset)
            start(order.done(msg, now))
    # then each message finished once, and each lane started its messages in offset order
    assert sorted(finished) == list(range(len(received)))
    for lane_offsets in started.values():
        assert lane_offsets == sorted(lane_offsets)
    assert order.waiting == 0 and order.keys_waiting == 0


def test_a_revocation_drops_what_waits_and_keeps_running_heads_of_those_partitions_only() -> None:
    # given two keys on partition 0 (a's head running, with two behind it; b's head handed on, not started) and one
    # key on partition 1 with one behind its running head
    order = lanes()
    a0, b1, a2, a3 = message(0, 0, b"a"), message(0, 1, b"b"), message(0, 2, b"a"), message(0, 3, b"a")
    c0, c1 = message(1, 0, b"c"), message(1, 1, b"c")
    order.offer([a0, b1, a2, a3, c0, c1], 0)
    order.started(a0)
    order.started(c0)
    # when partition 0 is revoked
    dropped = order.revoke({0})
    # then what waited and the head that never started are dropped; the running head stays, alone in its lane
    assert sorted(offsets(dropped)) == [1, 2, 3]
    assert order.held == Counter({0: 1, 1: 2})
    assert order.waiting == 1 and order.keys_waiting == 1  # partition 1's untouched
    # and when a's head finishes, nothing of partition 0 starts; partition 1's lane moves on as before
    assert order.done(a0, 10) == []
    assert offsets(order.done(c0, 10)) == [1]
    assert order.held == Counter({1: 1})
    # and the dropped head, if a handler reaches it later, starts nothing either
    assert order.done(b1, 20) == []


def test_a_revocation_drops_a_head_waiting_for_its_retry() -> None:
    # given a key whose head failed and waits for its retry, with one message behind it
    order = lanes()
    first, second = message(0, 0, b"a"), message(0, 1, b"a")
    order.offer([first, second], 0)
    order.started(first)
    order.retry(first._replace(redelivery_count=1), 500)
    # when its partition is revoked
    dropped = order.revoke({0})
    # then both are dropped, and the retry never comes due
    assert sorted(offsets(dropped)) == [0, 1]
    assert not order.held
    assert order.due(1_000) == []


def test_a_head_that_retries_or_follows_is_not_running_until_started_again() -> None:
    # given a key whose started head finished, so the next one is handed on but not started
    order = lanes(Ordering.PARTITION)
    first, second = message(0, 0, b"a"), message(0, 1, b"b")
    order.offer([first, second], 0)
    order.started(first)
    assert offsets(order.done(first, 1)) == [1]
    # when the partition is revoked before the next one starts, then it is dropped
    assert offsets(order.revoke({0})) == [1]
    # and a message offered after the revocation (the partition assigned again) starts as usual
    assert offsets(order.offer([message(0, 7, b"c")], 2)) == [7]


def test_a_head_running_through_a_revocation_is_not_retried_in_place_but_one_received_after_is() -> None:
    # given a key's head running when its partition is revoked, and a message of the key received after (the
    # partition assigned again)
    order = lanes()
    first, later = message(0, 0, b"a"), message(0, 9, b"a")
    order.offer([first], 0)
    order.started(first)
    order.revoke({0})
    order.offer([later], 1)
    # then the head ran through a revocation, and when it finishes the later message starts, not revoked
    assert order.revoked_while_running(first)
    assert offsets(order.done(first, 2)) == [9]
    order.started(later)
    assert not order.revoked_while_running(later)


def test_a_head_let_start_as_it_is_offered_goes_through_every_change_of_its_lane() -> None:
    order = lanes()
    a0, a1, b0, c0 = message(0, 0, b"a"), message(0, 1, b"a"), message(0, 2, b"b"), message(1, 3, b"c")
    assert offsets(order.offer([a0, b0, c0], 0, running=True)) == [0, 2, 3]
    # an item arriving behind it waits, and is counted as waiting
    assert order.offer([a1], 1, running=True) == []
    assert order.waiting == 1 and order.keys_waiting == 1
    # a head held back after all (the breaker opened) is dropped by a revocation; a running one runs on, revoked
    order.started(b0, running=False)
    assert sorted(offsets(order.revoke({0}))) == [1, 2]
    assert order.revoked_while_running(a0) and not order.revoked_while_running(c0)
    assert order.done(a0, 2) == [] and order.held == Counter({1: 1})
    # a head retried keeps its lane until its time, then runs again
    order.retry(c0._replace(redelivery_count=1), 10)
    assert order.due(9) == [] and [m.redelivery_count for m in order.due(10)] == [1]
    assert order.done(c0, 11) == [] and not order.held
