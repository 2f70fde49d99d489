"""`NodeWatch`: what `kmq broker --nodes N` does when nodes die — the pure policy, apart from the processes.

A cluster keeps serving while a majority of its nodes runs (the KRaft quorum: 2 of 3). A node found dead is
reported once; with `restart_after_ms` it is started again that long after it was found dead (and again after as
long if that start fails). Fewer than a quorum left ends the cluster. Nothing here touches a process or the clock.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Turn:
    """What one look at the nodes found: nodes newly dead, nodes to start again now, and whether a quorum is left."""

    died: tuple[int, ...]
    restart: tuple[int, ...]
    quorum_lost: bool


class NodeWatch:
    """Tracks which nodes of a cluster are down since when; `look` says what to do about it."""

    def __init__(self, node_ids: list[int], restart_after_ms: int | None) -> None:
        if restart_after_ms is not None and restart_after_ms < 0:
            raise ValueError(f"restart_after_ms must be >= 0, not {restart_after_ms}")
        self.node_ids = list(node_ids)
        self.quorum = len(node_ids) // 2 + 1
        self._restart_after_ms = restart_after_ms
        self._down_since_ms: dict[int, int] = {}

    @property
    def down(self) -> list[int]:
        return sorted(self._down_since_ms)

    def look(self, running: Mapping[int, bool], now_ms: int) -> Turn:
        """The nodes' state now (node id -> its process runs) and what follows from it."""
        died = tuple(node for node in self.node_ids if not running[node] and node not in self._down_since_ms)
        for node in died:
            self._down_since_ms[node] = now_ms
        for node in [node for node in self._down_since_ms if running[node]]:
            del self._down_since_ms[node]  # back (started by someone else): watched as any running node
        alive = len(self.node_ids) - len(self._down_since_ms)
        return Turn(died, self._due(now_ms), alive < self.quorum)

    def started(self, node_id: int) -> None:
        """The node runs again."""
        self._down_since_ms.pop(node_id, None)

    def start_failed(self, node_id: int, now_ms: int) -> None:
        """A start of the node failed: the next attempt is `restart_after_ms` from now."""
        self._down_since_ms[node_id] = now_ms

    def _due(self, now_ms: int) -> tuple[int, ...]:
        if self._restart_after_ms is None:
            return ()
        after = self._restart_after_ms
        return tuple(sorted(node for node, since in self._down_since_ms.items() if now_ms - since >= after))


def describe_exit(code: int | None) -> str:
    """`exit code 1`, `killed by SIGKILL` (a negative return code is the signal, as subprocess reports it)."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
