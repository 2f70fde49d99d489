"""`NodeWatch`, the policy of `kmq broker --nodes N`: report a dead node once, serve on with a quorum, start dead
nodes again when due."""

from __future__ import annotations

import pytest

from kmq.embedded._node_watch import NodeWatch, Turn, describe_exit
from tests.helpers import run_kmq_broker

UP = {1: True, 2: True, 3: True}


def test_a_dead_node_is_reported_once_and_a_quorum_serves_on() -> None:
    # Given a watched 3-node cluster with no restarts
    watch = NodeWatch([1, 2, 3], restart_after_ms=None)
    assert watch.quorum == 2
    assert watch.look(UP, 0) == Turn((), (), quorum_lost=False)
    # When node 1 dies, then it is reported, once, and 2 of 3 nodes are a quorum
    assert watch.look({**UP, 1: False}, 500) == Turn((1,), (), quorum_lost=False)
    assert watch.look({**UP, 1: False}, 10_000_000) == Turn((), (), quorum_lost=False)
    assert watch.down == [1]


def test_fewer_than_a_quorum_ends_the_cluster() -> None:
    watch = NodeWatch([1, 2, 3], restart_after_ms=1000)
    watch.look({**UP, 2: False}, 0)
    assert watch.look({1: True, 2: False, 3: False}, 100) == Turn((3,), (), quorum_lost=True)


def test_one_node_is_its_own_quorum() -> None:
    assert NodeWatch([1], None).look({1: False}, 0) == Turn((1,), (), quorum_lost=True)


def test_a_dead_node_is_due_for_a_start_after_the_delay_and_again_after_a_failed_start() -> None:
    # Given node 2 found dead at 1 000 ms, restarts after 5 000 ms
    watch = NodeWatch([1, 2, 3], restart_after_ms=5000)
    watch.look({**UP, 2: False}, 1000)
    # Then it is not due before 6 000 ms, and due from then on
    assert watch.look({**UP, 2: False}, 5999).restart == ()
    assert watch.look({**UP, 2: False}, 6000).restart == (2,)
    # When the start fails at 7 000 ms, then the next attempt is due 5 000 ms later
    watch.start_failed(2, 7000)
    assert watch.look({**UP, 2: False}, 11_999).restart == ()
    assert watch.look({**UP, 2: False}, 12_000).restart == (2,)
    # When it starts, then it is watched as any running node: dying again is reported again
    watch.started(2)
    assert watch.down == []
    assert watch.look({**UP, 2: False}, 13_000).died == (2,)


def test_a_node_back_by_other_means_is_no_longer_down() -> None:
    watch = NodeWatch([1, 2, 3], restart_after_ms=None)
    watch.look({**UP, 3: False}, 0)
    assert watch.look(UP, 10) == Turn((), (), quorum_lost=False)
    assert watch.down == []


def test_a_negative_restart_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="restart_after_ms must be >= 0"):
        NodeWatch([1, 2, 3], restart_after_ms=-1)


@pytest.mark.parametrize(
    ("code", "described"),
    [
        (0, "exit code 0"),
        (1, "exit code 1"),
        (-9, "killed by SIGKILL"),
        (-15, "killed by SIGTERM"),
        (None, "still running"),
    ],
)
def test_an_exit_is_described_by_its_code_or_signal(code: int | None, described: str) -> None:
    assert describe_exit(code) == described


def test_restarting_dead_nodes_needs_a_cluster() -> None:
    result = run_kmq_broker("--backend", "kafka", "--restart-dead-after", "5")
    assert result.exit_code == 2
    assert "--restart-dead-after needs --nodes 3" in result.stderr
