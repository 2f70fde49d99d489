"""`OrderGate` inside a `WorkerCore`, without Kafka: in-place retries and their dead letter, leases kept while a key
waits, per-partition backpressure, give-back on shutdown, and the `--ordering` flag."""

from __future__ import annotations

from typer.testing import CliRunner

from kmq.cli._app import _register_all, app
from kmq.config import KmqConfig
from kmq.message import Message
from kmq.worker.config import WorkerConfig
from kmq.worker.core import UNMARKED, WorkerCore
from kmq.worker.leases import KEY_SHIFT, lease_keys
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.ordered import PAUSE_AFTER_MS, OrderGate
from kmq.worker.outcome import FAILED, OK, Outcome

CONFIG = KmqConfig(
    bootstrap_servers="unused:9092",
    queue_topic="jobs",
    msg_timeout_ms=30_000,
    max_redeliveries=2,
    nack_backoff_base_ms=100,
)
NOW = 1_000_000


def gated(**settings: object) -> tuple[WorkerCore, OrderGate]:
    core = WorkerCore(CONFIG, WorkerConfig(ordering="key", **settings), WorkerMetrics("jobs"))  # type: ignore[arg-type]
    assert core.gate is not None
    return core, core.gate


def leased(core: WorkerCore) -> set[tuple[int, int]]:
    """The (partition, offset) of every message whose lease the core holds."""
    return {(key & ((1 << KEY_SHIFT) - 1), key >> KEY_SHIFT) for key in core.leases.held}


def keyed(partition: int, offset: int, key: bytes) -> Message:
    return Message(b"v", key, "jobs", partition, offset, 0, 0, NOW + 30_000)


def test_a_failure_is_retried_in_place_then_dead_lettered_after_the_last_attempt() -> None:
    # given key a with two messages, its first one running
    core, gate = gated()
    first, second = keyed(0, 0, b"a"), keyed(0, 1, b"a")
    assert core.admit([first, second], NOW) == [first]
    # when it fails: nothing to settle, nothing starts, it is due again after the backoff with one more attempt
    assert gate.finish(first, FAILED, NOW) == (None, [])
    assert gate.retries_due(NOW + 99) == []
    (again,) = gate.retries_due(NOW + 100)
    assert again.redelivery_count == 1 and again.offset == 0
    # and asks for a retry in 50 ms: the same again
    assert gate.finish(again, Outcome("retry", 50), NOW + 110) == (None, [])
    (last,) = gate.retries_due(NOW + 160)
    # then its third failure (1 + max_redeliveries attempts) dead-letters it and the key moves on
    settled, following = gate.finish(last, FAILED, NOW + 170)
    assert settled == Outcome("reject", reason="3 attempts failed, the last: failed")
    assert following == [second]
    assert (0, 0) not in leased(core) and (0, 1) in leased(core)


def test_waiting_messages_keep_their_leases_and_are_extended() -> None:
    core, _ = gated()
    batch = [keyed(0, i, b"a") for i in range(3)]
    core.admit(batch, NOW)
    due = core.due(NOW + 25_000)  # past the margin (a third of the 30 s lease) for every message, waiting or not
    assert sorted(msg.offset for msg, _ in due.extend) == [0, 1, 2]


def test_a_full_partition_pauses_resumes_at_half_and_bounds_the_receive() -> None:
    # given a limit of 4 per partition, partition 0 holding 4 of one key and partition 1 holding 1
    core, gate = gated(concurrency=2, prefetch=6, partition_limit=4)
    zero = [keyed(0, i, b"a") for i in range(4)]
    core.admit([*zero, keyed(1, 0, b"b")], NOW)
    # then no receive may take any of partition 0 (room 0), which pauses once it has been full for a while
    assert gate.flow(NOW) == (set(), set())
    assert gate.room == 0
    assert gate.flow(NOW + PAUSE_AFTER_MS) == ({0}, set())
    assert gate.room == 3  # partition 1's room
    # when partition 0 is down to 2 (half), it resumes
    _, following, _ = core.finish_ordered([zero[0]])
    core.finish_ordered(following)
    assert gate.flow(NOW + PAUSE_AFTER_MS + 1) == (set(), {0})
    core.publish(NOW)
    assert core.metrics.registry.get_sample_value("kmq_worker_partition_held", {"topic": "jobs", "partition": "0"}) == 2


def test_shutdown_gives_back_waiting_and_retrying_messages_not_running_ones() -> None:
    core, gate = gated()
    a0, a1, b0 = keyed(0, 0, b"a"), keyed(0, 1, b"a"), keyed(0, 2, b"b")
    core.admit([a0, a1, b0], NOW)
    gate.finish(b0, FAILED, NOW)  # b0 waits for its retry
    given = gate.give_back()
    assert sorted(msg.offset for msg in given) == [1, 2]
    assert list(leased(core)) == [(0, 0)]  # a0 runs on
    assert gate.finish(a0, OK, NOW) == (OK, [])


def test_a_revocation_drops_what_waits_unsettled_and_lets_running_handlers_finish() -> None:
    # given on partition 0 key a running with one behind it and key b handed on, not started; on partition 1 key c
    # running with one behind it
    core, gate = gated()
    a0, a1, b2 = keyed(0, 0, b"a"), keyed(0, 1, b"a"), keyed(0, 2, b"b")
    c0, c1 = keyed(1, 0, b"c"), keyed(1, 1, b"c")
    core.admit([a0, a1, b2, c0, c1], NOW)
    assert core.may_start(a0) and core.may_start(c0)
    # when partition 0 is revoked
    dropped = gate.revoked({0})
    # then what did not start is dropped with its lease (no longer extended, nothing to settle), the gauges follow
    assert sorted(msg.offset for msg in dropped) == [1, 2]
    assert sorted(leased(core)) == [(0, 0), (1, 0), (1, 1)]
    assert not core.may_start(b2)  # a handler that reaches it later does not start it
    assert gate.skipped(b2, NOW) == []
    core.publish(NOW)
    sample = core.metrics.registry.get_sample_value
    assert sample("kmq_worker_partition_held", {"topic": "jobs", "partition": "0"}) == 1
    assert sample("kmq_worker_keys_waiting", {"topic": "jobs"}) == 1  # c's
    # and the running head settles as it would unordered, starting nothing of partition 0; partition 1 moves on
    assert gate.finish(a0, OK, NOW) == (OK, [])
    assert gate.finish(c0, OK, NOW) == (OK, [c1])


def test_a_failure_of_a_handler_running_through_a_revocation_is_nacked_not_retried_in_place() -> None:
    # given a key's head running, and one behind it, when its partition is revoked
    core, gate = gated()
    a0, a1 = keyed(0, 0, b"a"), keyed(0, 1, b"a")
    core.admit([a0, a1], NOW)
    assert core.may_start(a0)
    gate.revoked({0})
    # when the head fails, then it settles as in an unordered worker (a nack), and nothing follows it here
    assert gate.finish(a0, FAILED, NOW) == (FAILED, [])
    assert not core.leases.held and not gate.holding()


def test_a_chunk_marked_started_whose_partition_is_revoked_before_a_message_runs_does_not_run_it() -> None:
    # given a chunk of heads let start under one lock: a0 and b1 of partition 0 (a2 waits behind a0), c0 of
    # partition 1, and a0 running
    core, gate = gated()
    a0, b1, a2, c0 = keyed(0, 0, b"a"), keyed(0, 1, b"b"), keyed(0, 2, b"a"), keyed(1, 0, b"c")
    chunk = core.admit([a0, b1, a2, c0], NOW)
    assert chunk == [a0, b1, c0]
    mark = core.start_ordered(chunk)
    assert core.may_start_marked(a0, mark)
    # when partition 0 is revoked before b1 runs: it is not among the messages dropped (it was let start)
    assert gate.revoked({0}) == [a2]
    assert (0, 1) in leased(core)
    # then the check before it runs refuses it and drops its lease unsettled, as the revocation drops what waits:
    # its START runs out and the tracker redelivers it to the partition's owner (nothing acknowledged, nothing lost)
    assert not core.may_start_marked(b1, mark)
    assert (0, 1) not in leased(core)
    assert gate.skipped(b1, NOW) == []
    # and the other partition's head still starts; a0, running through the revocation, finishes and starts nothing
    assert core.may_start_marked(c0, mark)
    owned, following, _ = core.finish_ordered([a0, c0])
    assert (owned, following) == ([a0, c0], [])
    assert not core.leases.held and not gate.holding()


def test_heads_let_start_as_they_are_received_do_not_run_once_their_partition_is_revoked() -> None:
    # given a batch received with the breaker closed: its heads let start at once, a1 waiting behind a0
    core, gate = gated()
    a0, a1, b2, c0 = keyed(0, 0, b"a"), keyed(0, 1, b"a"), keyed(0, 2, b"b"), keyed(1, 0, b"c")
    heads, mark, keys, in_order = core.admit_ordered([a0, a1, b2, c0], NOW)
    assert heads == [a0, b2, c0] and keys == lease_keys(heads) and not in_order
    # when partition 0 is revoked before a handler thread reaches them: only what waits behind them is dropped then
    assert gate.revoked({0}) == [a1]
    # then neither of its heads starts, both dropped unsettled (the tracker redelivers them); partition 1's does
    assert not core.may_start_marked(a0, mark) and not core.may_start_marked(b2, mark)
    assert sorted(leased(core)) == [(1, 0)]
    assert gate.skipped(a0, NOW) == [] and gate.skipped(b2, NOW) == []
    assert core.may_start_marked(c0, mark)
    assert core.finish_ordered([c0])[:2] == ([c0], [])
    assert not core.leases.held and not gate.holding()


def test_heads_received_while_the_breaker_is_open_are_not_let_start_and_a_revocation_drops_them() -> None:
    core, gate = gated(breaker_min_calls=1, breaker_backoff_ms=1000)
    with core.lock:
        core.record_outcome(FAILED, NOW)
    a0 = keyed(0, 0, b"a")
    assert core.admit_ordered([a0], NOW) == ([a0], UNMARKED, lease_keys([a0]), None)
    assert gate.revoked({0}) == [a0]
    assert not core.leases.held


def test_heads_marked_by_one_thread_and_shared_with_another_do_not_run_after_a_revocation() -> None:
    # given a0 finishing on one thread, which lets a1 start (marked with the finish) and shares it through the queue
    core, gate = gated()
    a0, a1, a2 = keyed(0, 0, b"a"), keyed(0, 1, b"a"), keyed(0, 2, b"a")
    core.admit([a0, a1], NOW)
    assert core.may_start_marked(a0, core.start_ordered([a0]))
    owned, following, _ = core.finish_ordered([a0])
    assert (owned, following) == ([a0], [a1])
    # when the partition is revoked, then assigned again and a2 received, before the thread that took a1 marks it
    assert gate.revoked({0}) == []
    assert core.admit([a2], NOW) == []  # behind a1: its lane is a1's
    mark = core.start_ordered([a1])
    # then a1 is dropped there, unsettled, and does not start with the fresh mark; its lane moves on to a2
    assert (0, 1) not in leased(core)
    assert not core.may_start_marked(a1, mark)
    assert gate.skipped(a1, NOW) == [a2]
    assert core.may_start_marked(a2, core.start_ordered([a2]))


def test_a_marked_head_held_back_by_an_opening_breaker_is_dropped_by_a_revocation() -> None:
    # given a chunk marked started while the breaker is closed, then the breaker opens before its head runs
    core, gate = gated(breaker_min_calls=1, breaker_backoff_ms=1000)
    a0, a1 = keyed(0, 0, b"a"), keyed(0, 1, b"a")
    (head,) = core.admit([a0, a1], NOW)
    mark = core.start_ordered([head])
    with core.lock:
        core.record_outcome(FAILED, NOW)
    # then it is held back, not started, and a revocation drops it with what waits behind it
    assert not core.may_start_marked(a0, mark)
    assert list(core.held) == [a0]
    assert sorted(msg.offset for msg in gate.revoked({0})) == [0, 1]
    assert not core.held and not core.leases.held


def test_the_ordering_flag_refuses_an_unknown_value() -> None:
    _register_all()
    result = CliRunner().invoke(
        app, ["worker", "mod:fn", "--ordering", "sideways"], env={"KMQ_BOOTSTRAP_SERVERS": "b:1"}
    )
    assert result.exit_code == 2
    assert "sideways" in result.output


def test_a_run_in_order_handed_over_after_its_running_message_was_revoked_lets_nothing_else_past_the_breaker() -> None:
    # given a batch admitted to run in order over partitions 0 and 1, then partition 0 revoked and the breaker open
    # while a0 runs
    core, gate = gated(breaker_min_calls=1, breaker_backoff_ms=1000)
    a0, b1, c2 = keyed(0, 0, b"a"), keyed(1, 1, b"b"), keyed(1, 2, b"c")
    _, mark, _, run_lease = core.admit_ordered([a0, b1, c2], NOW, in_order=True)
    assert run_lease is not None
    gate.revoked({0})
    with core.lock:
        core.record_outcome(FAILED, NOW)
        # when the run is taken over with a0 as the message it ran
        heads, head_mark = core.hand_over_locked([a0, b1, c2], mark, NOW, first_ran=True)
    # then a0 is dropped with its partition, and b1, which never ran, was not let start in its place: a revocation
    # of partition 1 drops it as it drops c2
    assert heads == [b1, c2] and head_mark == UNMARKED and (0, 0) not in leased(core)
    assert sorted(msg.offset for msg in gate.revoked({1})) == [1, 2]


def test_a_run_in_order_handed_over_keeps_its_running_message_started_whatever_the_breaker() -> None:
    # given a batch admitted to run in order outside the lanes, then the breaker open while its first message runs
    core, gate = gated(breaker_min_calls=1, breaker_backoff_ms=1000)
    a0, a1, b2 = keyed(0, 0, b"a"), keyed(0, 1, b"a"), keyed(0, 2, b"b")
    heads, mark, _, run_lease = core.admit_ordered([a0, a1, b2], NOW, in_order=True)
    assert run_lease is not None and heads == [a0, a1, b2] and gate.in_order and gate.lanes.idle
    with core.lock:
        core.record_outcome(FAILED, NOW)
        # when the run is taken over: a0 (running) and the rest enter the lanes
        heads, head_mark = core.hand_over_locked([a0, a1, b2], mark, NOW, first_ran=True)
    assert heads == [a0, b2] and head_mark == UNMARKED and not gate.in_order
    # then a revocation leaves the running a0 to finish (its lease held), and drops what never started
    assert sorted(msg.offset for msg in gate.revoked({0})) == [1, 2]
    assert leased(core) == {(0, 0)}
    assert gate.lanes.revoked_while_running(a0)
