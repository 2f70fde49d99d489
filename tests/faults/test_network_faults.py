"""Network faults on a 3-node Apache Kafka (toxiproxy on every link), judged by the history checker.

One cluster, one queue and one set of clients (two worker processes, a tracker, the REST facade and its HTTP client)
serve the four faults back to back. For each fault a sender sends numbered messages from 5 s before it until 5 s
after it, and on until every client acking before it has acked again (at most 30 s after it); the test then waits
for every confirmed send to be acknowledged and checks the history of those numbers:
nothing lost, no handler run after a confirmed ack that the fault does not explain, the first ack within 30 s of the
fault's end. The duplicates are printed per fault.

Order matters (the module's tests run in file order): the cut-offs from the clients leave leadership where it was,
the broker cut off from the others moves it, so it comes last. Each test checks the leadership it assumes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException

from tests.conftest import backend_under_test, external_cluster_requested, unique_topic
from tests.faults.history import Verdict
from tests.faults.netrig import (
    MARKERS_LEADER,
    QUEUE_LEADER,
    Rig,
    Sender,
    client_links,
    isolation_links,
    running_rig,
    wait_acked,
)

pytestmark = [pytest.mark.faults, pytest.mark.integration, pytest.mark.timeout(600)]
RATE = 100  # messages per second: well within what the rig handles, so every fault meets a queue with work in it
LEAD_S = 5.0  # sending before the fault and after it
CUT_S = 20.0
SLOW_S = 60.0
RESUME_LIMIT_S = 30.0
SETTLE_TIMEOUT_S = 180.0
RESET_EVERY_S = 10.0
IN_SYNC_TIMEOUT_S = 60.0
_numbers = iter(range(1, 100))


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    if external_cluster_requested() or backend_under_test() != "kafka":
        pytest.fail("the network-fault tests need the embedded kafka backend (KMQ_TEST_BACKEND=kafka)")
    with running_rig(tmp_path_factory.mktemp("netfaults"), unique_topic("netfaults")) as rig:
        yield rig


def run_fault(
    rig: Rig,
    name: str,
    duration_s: float,
    begin: Callable[[], None],
    end: Callable[[], None],
    during: Callable[[float], None] = lambda _: None,
) -> Verdict:
    """Send through `begin` .. `end` (`duration_s` apart, `during(elapsed)` called meanwhile), wait for the acks,
    and return the verdict on this fault's numbers (printed with its duplicates)."""
    first = next(_numbers) * 1_000_000
    sender = Sender(rig.config, rig.recorder(f"sender-{first}"), first, RATE).start()
    time.sleep(LEAD_S)  # the load before the fault: time is what this waits for, not a condition
    begin()
    fault_start = time.time()
    started = time.monotonic()
    try:
        while (elapsed := time.monotonic() - started) < duration_s:
            rig.check_alive()
            during(elapsed)
            time.sleep(0.2)  # the fault's duration is the point: a fixed length, checked every 0.2 s
    finally:
        end()
    fault_end = time.time()
    send_on_until_resumed(rig, sender, fault_start, fault_end)
    numbers = sender.stop()
    wait_acked(rig, numbers, SETTLE_TIMEOUT_S)
    verdict = rig.history().check(numbers, fault_start, fault_end)
    print(f"\n{name}: {verdict.summary()}; {sender.failed} sends unconfirmed")
    for after in verdict.unexplained[:10]:
        print(f"  unexplained: {after}")
    return verdict


def send_on_until_resumed(rig: Rig, sender: Sender, fault_start: float, fault_end: float) -> None:
    """Keep sending for `LEAD_S` after the fault, and on until every client that acked before its end has acked one of
    its messages after it, or `RESUME_LIMIT_S` has passed: a client that rejoins its group after the sender stopped
    has nothing of this fault's left to ack, and would count as never resumed however soon it came back."""
    time.sleep(LEAD_S)  # the load after the fault: time is what this waits for, not a condition
    deadline = time.monotonic() + RESUME_LIMIT_S - (time.time() - fault_end)
    while time.monotonic() < deadline:
        rig.check_alive()
        sent = range(sender.first, sender.first + sender.sent_upto)
        if not rig.history().check(sent, fault_start, fault_end).not_resumed:
            return
        time.sleep(0.5)  # a poll interval: the condition is re-checked with a deadline


def assert_sound(verdict: Verdict) -> None:
    assert verdict.sent > 0
    assert not verdict.lost, f"lost {len(verdict.lost)}, e.g. {verdict.lost[:10]}"
    assert not verdict.unexplained, f"handled again after a confirmed ack: {verdict.unexplained[:10]}"
    assert verdict.resume_s is not None and verdict.resume_s <= RESUME_LIMIT_S, verdict.summary()
    late = {by: s for by, s in verdict.resume_by.items() if s is not None and s > RESUME_LIMIT_S}
    assert not late and not verdict.not_resumed, f"clients that did not resume within 30 s: {verdict.summary()}"


def test_queue_leader_cut_off_from_the_clients(rig: Rig) -> None:
    assert rig.leaders(rig.config.queue_topic).most_common(1)[0][0] == QUEUE_LEADER
    links = client_links([QUEUE_LEADER])
    verdict = run_fault(
        rig,
        "queue leader cut off from the clients",
        CUT_S,
        lambda: rig.proxy.set_enabled(links, False),
        lambda: rig.proxy.set_enabled(links, True),
    )
    assert_sound(verdict)


def test_markers_leader_cut_off_while_the_queue_leader_stays(rig: Rig) -> None:
    assert rig.leaders(rig.config.markers_topic).most_common(1)[0][0] == MARKERS_LEADER
    assert rig.leaders(rig.config.queue_topic).most_common(1)[0][0] != MARKERS_LEADER
    links = client_links([MARKERS_LEADER])
    verdict = run_fault(
        rig,
        "markers leader cut off from the clients",
        CUT_S,
        lambda: rig.proxy.set_enabled(links, False),
        lambda: rig.proxy.set_enabled(links, True),
    )
    assert_sound(verdict)


def test_latency_and_loss_on_the_clients_links(rig: Rig) -> None:
    links = client_links(rig.cluster.nodes.ids)
    resets = [0.0]

    def slow() -> None:
        for link in links:
            rig.proxy.add_toxic(link, "latency", "latency", "downstream", {"latency": 200, "jitter": 100})
            rig.proxy.add_toxic(link, "loss", "reset_peer", "downstream", {"timeout": 0}, toxicity=0.05)

    def reroll(elapsed: float) -> None:
        # toxiproxy draws a toxic's toxicity once per connection: drawn anew every 10 s, about 5 % of the links
        # are reset in each period, as a burst of loss that outlasts TCP's retransmissions would.
        if elapsed - resets[-1] >= RESET_EVERY_S:
            resets.append(elapsed)
            for link in links:
                rig.proxy.remove_toxic(link, "loss")
                rig.proxy.add_toxic(link, "loss", "reset_peer", "downstream", {"timeout": 0}, toxicity=0.05)

    verdict = run_fault(rig, "200 ms latency and 5 % loss on the clients' links", SLOW_S, slow, rig.proxy.reset, reroll)
    assert_sound(verdict)


def test_broker_cut_off_from_the_other_two(rig: Rig) -> None:
    leader = rig.leaders(rig.config.queue_topic).most_common(1)[0][0]
    links = isolation_links(leader, rig.cluster.nodes.ids)
    other = next(node for node in rig.cluster.nodes.ids if node != leader)
    # the other nodes take over only partitions whose ISR holds them (a follower that fell behind leaves it)
    rig.wait_in_sync(rig.config.queue_topic, IN_SYNC_TIMEOUT_S)
    seen: list[str] = []  # the leaders as another node saw them near the cut's end: what to look at when none moved

    def look(elapsed: float) -> None:
        if elapsed >= CUT_S - 2 and not seen:
            try:
                seen.append(str(dict(rig.leaders(rig.config.queue_topic, seen_by=other))))
            except KafkaException as e:
                seen.append(f"unknown ({e})")

    verdict = run_fault(
        rig,
        f"node {leader} (the queue's leader) cut off from the other nodes",
        CUT_S,
        lambda: rig.proxy.set_enabled(links, False),
        lambda: rig.proxy.set_enabled(links, True),
        look,
    )
    moved = rig.leaders(rig.config.queue_topic)
    print(f"  the queue's partitions are led by {dict(moved)} after the fault; near its end node {other} saw {seen}")
    assert_sound(verdict)
    assert set(moved) != {leader}, f"no leader election: node {leader} still leads all (node {other} saw {seen})"
