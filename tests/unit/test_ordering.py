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


def test_a_batch_with_a_key_twice_starts_its_first_and_queues_the_second() -> None:
    order = lanes()
    a0, b1, a2 = message(0, 0, b"a"), message(0, 1, b"b"), message(0, 2, b"a")
    assert offsets(order.offer([a0, b1, a2], 0, running=True)) == [0, 1]
    assert order.waiting == 1 and order.held == Counter({0: 3})
    # a chunk finishing both heads starts the second of a only
    assert offsets(order.done_all([a0, b1], 4, running=True)) == [2]
    assert order.take_waits_ms() == [4] and order.held == Counter({0: 1})


def test_a_key_busy_from_an_earlier_batch_waits_behind_its_head_in_offset_order() -> None:
    order = lanes()
    a0, b1 = message(0, 0, b"a"), message(0, 1, b"b")
    order.offer([a0, b1], 0, running=True)
    # a later batch: a twice more (behind a busy head) and a new key
    a2, c3, a4 = message(0, 2, b"a"), message(0, 3, b"c"), message(0, 4, b"a")
    assert offsets(order.offer([a2, c3, a4], 1, running=True)) == [3]
    assert order.waiting == 2 and order.keys_waiting == 1
    assert offsets(order.done_all([b1, a0, c3], 3, running=True)) == [2]
    assert offsets(order.done_all([a2], 5, running=True)) == [4]
    assert order.done_all([a4], 6, running=True) == [] and not order.held
    assert order.take_waits_ms() == [2, 4] and order.waiting == 0


def test_a_chunk_with_a_message_twice_or_one_given_back_moves_each_lane_on_once() -> None:
    order = lanes()
    a0, a1, b2, b3 = message(0, 0, b"a"), message(0, 1, b"a"), message(0, 2, b"b"), message(0, 3, b"b")
    order.offer([a0, a1, b2, b3], 0, running=True)
    # the same head twice in one chunk: its lane moves on once
    assert offsets(order.done_all([a0, a0, b2], 1, running=True)) == [1, 3]
    assert order.held == Counter({0: 2})
    # a message that is not (or no longer) its lane's head starts nothing
    assert order.done_all([a0, b2], 2, running=True) == [] and order.held == Counter({0: 2})


def test_messages_without_a_key_in_a_batch_with_keys_each_run_at_once() -> None:
    order = lanes()
    received = [message(0, 0, None), message(0, 1, b"a"), message(0, 2, None), message(0, 3, b"a")]
    assert offsets(order.offer(received, 0, running=True)) == [0, 1, 2]
    assert offsets(order.done_all(received[:3], 1, running=True)) == [3]


def test_a_revocation_while_lanes_run_with_nothing_behind_them_keeps_them_running() -> None:
    order = lanes()
    a0, b1, c2 = message(0, 0, b"a"), message(0, 1, b"b"), message(1, 2, b"c")
    order.offer([a0, b1, c2], 0, running=True)
    assert order.revoke({0}) == []
    assert order.revoked_while_running(a0) and order.revoked_while_running(b1)
    assert not order.revoked_while_running(c2)
    # a chunk mixing revoked lanes and others finishes them all; nothing is revoked afterwards
    assert order.done_all([a0, c2, b1], 1, running=True) == [] and not order.held
    a3 = message(0, 3, b"a")
    assert order.offer([a3], 2, running=True) == [a3] and not order.revoked_while_running(a3)


def test_a_retry_on_a_lane_running_alone_keeps_its_lane_and_later_messages_wait() -> None:
    order = lanes()
    a0, b1 = message(0, 0, b"a"), message(0, 1, b"b")
    order.offer([a0, b1], 0, running=True)
    again = a0._replace(redelivery_count=1)
    order.retry(again, 10)
    a2 = message(0, 2, b"a")
    assert order.offer([a2], 1, running=True) == []
    # b finishes as usual while a retries; a's first finishes only as its retry
    assert order.done_all([b1], 2, running=True) == []
    assert order.due(10) == [again]
    assert order.start([again]) == []
    assert offsets(order.done_all([again], 11, running=True)) == [2]
    assert order.held == Counter({0: 1})


def _place(msg: Message) -> tuple[int, int, int]:
    return msg.partition, msg.offset, msg.redelivery_count


class _Reference:
    """The lanes as one object each, every operation item by item: what `OrderedLanes` must do."""

    def __init__(self, ordering: Ordering) -> None:
        self.lane_of = lane_function(ordering)
        self.lanes: dict[object, dict[str, object]] = {}
        self.retries: list[tuple[int, int, object]] = []  # (at, sequence, lane)
        self.held: Counter[int] = Counter()
        self.waits: list[int] = []

    def offer(self, items: list[Message], now: int, running: bool) -> list[Message]:
        startable = []
        for item in items:
            self.held[item.partition] += 1
            lane = self.lanes.get(self.lane_of(item))
            if lane is None:
                self.lanes[self.lane_of(item)] = {"head": item, "waiting": [], "retry": None, "running": running}
                self.lanes[self.lane_of(item)]["revoked"] = False
                startable.append(item)
            else:
                lane["waiting"].append((item, now))  # type: ignore[attr-defined]
        return startable

    def done_all(self, items: list[Message], now: int, running: bool) -> list[Message]:
        following = []
        for item in items:
            key = self.lane_of(item)
            lane = self.lanes.get(key)
            if lane is None or lane["head"].offset != item.offset:  # type: ignore[attr-defined]
                continue
            self._forget(item)
            waiting: list[tuple[Message, int]] = lane["waiting"]  # type: ignore[assignment]
            if not waiting:
                del self.lanes[key]
                continue
            head, since = waiting.pop(0)
            lane.update(head=head, retry=None, running=running, revoked=False)
            self.waits.append(max(0, now - since))
            following.append(head)
        return following

    def retry(self, again: Message, at: int) -> None:
        lane = self.lanes[self.lane_of(again)]
        lane.update(head=again, retry=at, running=False)
        self.retries.append((at, len(self.retries) and self.retries[-1][1] + 1, self.lane_of(again)))

    def due(self, now: int) -> list[Message]:
        started = []
        for at, seq, key in sorted(r for r in self.retries if r[0] <= now):
            self.retries.remove((at, seq, key))
            lane = self.lanes.get(key)
            if lane is not None and lane["retry"] == at:
                lane["retry"] = None
                started.append(lane["head"])
        return started  # type: ignore[return-value]

    def start(self, items: list[Message]) -> list[Message]:
        revoked = []
        for item in items:
            lane = self.lanes.get(self.lane_of(item))
            if lane is not None and lane["head"].offset == item.offset:  # type: ignore[attr-defined]
                if lane["revoked"]:
                    revoked.append(item)
                else:
                    lane["running"] = True
        return revoked

    def revoked_while_running(self, item: Message) -> bool:
        lane = self.lanes.get(self.lane_of(item))
        return lane is not None and lane["revoked"] is True and lane["head"].offset == item.offset  # type: ignore[attr-defined]

    def revoke(self, partitions: set[int]) -> list[Message]:
        dropped: list[Message] = []
        for key, lane in list(self.lanes.items()):
            if lane["head"].partition not in partitions:  # type: ignore[attr-defined]
                continue
            dropped += [item for item, _ in lane["waiting"]]  # type: ignore[attr-defined]
            lane["waiting"] = []
            if not lane["running"]:
                dropped.append(lane["head"])  # type: ignore[arg-type]
                del self.lanes[key]
            else:
                lane["revoked"] = True
        for item in dropped:
            self._forget(item)
        return dropped

    def give_back(self) -> list[Message]:
        given: list[Message] = []
        for key, lane in list(self.lanes.items()):
            given += [item for item, _ in lane["waiting"]]  # type: ignore[attr-defined]
            lane["waiting"] = []
            if lane["retry"] is not None:
                given.append(lane["head"])  # type: ignore[arg-type]
                del self.lanes[key]
        for item in given:
            self._forget(item)
        return given

    def _forget(self, item: Message) -> None:
        self.held[item.partition] -= 1
        if not self.held[item.partition]:
            del self.held[item.partition]


@settings(max_examples=150, deadline=None)
@given(
    keys=st.lists(st.sampled_from([b"a", b"b", b"c", b"d", None]), min_size=20, max_size=80),
    steps=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 1_000)), min_size=40, max_size=150),
    ordering=st.sampled_from([Ordering.KEY, Ordering.PARTITION]),
)
def test_lanes_do_what_lanes_kept_item_by_item_do_for_any_batches_chunks_and_changes(
    keys: list[bytes | None], steps: list[tuple[int, int]], ordering: Ordering
) -> None:
    # given messages over three partitions, and both kinds of lanes
    received = [message(i % 3, i, key) for i, key in enumerate(keys)]
    order, reference = OrderedLanes(lane_function(ordering)), _Reference(ordering)
    active: list[Message] = []  # what either returned to run (the same, checked), not finished yet
    finished: list[Message] = []
    offered = 0
    # when they are offered in batches, and chunks of what started finish (with a message twice, or one finished
    # already, now and then), retry, are revoked, given back or started again, in any order
    for now, (action, choice) in enumerate(steps, start=1):
        running = choice % 4 != 0
        got: list[Message] = []
        if action <= 2 and offered < len(received):
            batch = received[offered : offered + 1 + choice % 12]
            offered += len(batch)
            got = order.offer(batch, now, running=running)
            assert got == reference.offer(batch, now, running)
        elif action <= 5 and active:
            at = choice % len(active)
            chunk, active[at:] = active[at : at + 1 + choice % 8], active[at + 1 + choice % 8 :]
            finished += chunk
            if choice % 5 == 0:
                chunk.append(chunk[0])
            elif choice % 5 == 1:
                chunk.insert(0, finished[choice % len(finished)])
            got = order.done_all(chunk, now, running=running)
            assert got == reference.done_all(chunk, now, running)
        elif action == 6 and active:
            head = active.pop(choice % len(active))
            if reference.lanes.get(reference.lane_of(head), {}).get("head") is head:
                again = head._replace(redelivery_count=head.redelivery_count + 1)
                order.retry(again, now + choice % 3)
                reference.retry(again, now + choice % 3)
        elif action == 7:
            dropped = order.revoke({choice % 3})
            assert sorted(map(_place, dropped)) == sorted(map(_place, reference.revoke({choice % 3})))
            active = [msg for msg in active if msg not in dropped]
        elif action == 8:
            assert order.start(active[: 1 + choice % 4]) == reference.start(active[: 1 + choice % 4])
        else:
            if choice % 10 == 0:
                given = order.give_back()
                assert sorted(map(_place, given)) == sorted(map(_place, reference.give_back()))
                active = [msg for msg in active if msg not in given]
            got = order.due(now)
            assert got == reference.due(now)
        active += got
        # then every change returns what the reference returns, and leaves the same counts
        assert order.held == reference.held
        assert order.waiting == sum(len(lane["waiting"]) for lane in reference.lanes.values())  # type: ignore[misc]
        assert order.keys_waiting == sum(1 for lane in reference.lanes.values() if lane["waiting"])
        assert order.take_waits_ms() == reference.waits
        reference.waits = []
        for msg in active:
            assert order.revoked_while_running(msg) == reference.revoked_while_running(msg)


def test_held_counts_stay_right_over_many_partitions_and_many_items_finished_between_reads() -> None:
    # given 10 000 messages over 12 partitions, 5 keys each, offered in batches and finished in chunks, held read
    # only every 4 000 messages
    order = lanes()
    received = [message(i % 12, i, bytes([i % 60])) for i in range(10_000)]
    running: list[Message] = []
    for start in range(0, len(received), 500):
        running += order.offer(received[start : start + 500], 0, running=True)
        while len(running) > 40:
            chunk, running = running[:16], running[16:]
            running += order.done_all(chunk, 1, running=True)
        if start % 4_000 == 0:
            # then held counts what is in the lanes: the heads running and the messages waiting
            assert sum(order.held.values()) == len(running) + order.waiting
            assert set(order.held) == set(range(12))
    while running:
        chunk, running = running[:16], running[16:]
        running += order.done_all(chunk, 1, running=True)
    assert not order.held and order.waiting == 0
