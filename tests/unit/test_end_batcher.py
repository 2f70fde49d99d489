"""EndBatcher: acknowledgements become BATCH END runs, written by a background thread within end_flush_ms."""

from __future__ import annotations

import threading
import time

from kmq.batch_markers import Run
from kmq.end_batcher import PARTITION_SHIFT, EndBatcher
from tests.helpers import wait_for


class Written:
    def __init__(self) -> None:
        self.records: list[tuple[int, tuple[Run, ...], float]] = []
        self.lock = threading.Lock()

    def __call__(self, partition: int, runs: tuple[Run, ...]) -> None:
        with self.lock:
            self.records.append((partition, runs, time.monotonic()))


def test_gathered_acks_are_written_as_runs_per_partition_by_the_thread() -> None:
    written = Written()
    batcher = EndBatcher(written, end_flush_ms=200)
    acks = [(0, 5), (0, 6), (0, 7), (0, 9), (1, 3), (0, 8)]
    batcher.add_many(p << PARTITION_SHIFT | o for p, o in acks)  # one extend: all in the same round
    wait_for(lambda: len(written.records) == 2, 5, what="two BATCH ENDs")
    assert sorted((p, runs) for p, runs, _ in written.records) == [(0, ((5, 5),)), (1, ((3, 1),))]
    batcher.close()


def test_no_ack_waits_past_end_flush_ms_while_acks_keep_coming() -> None:
    written = Written()
    batcher = EndBatcher(written, end_flush_ms=100)
    added: dict[int, float] = {}
    for offset in range(40):
        added[offset] = time.monotonic()
        batcher.add(0, offset)
        time.sleep(0.01)  # a steady trickle of acknowledgements, as from a worker
    wait_for(lambda: sum(n for _, runs, _ in written.records for _, n in runs) == 40, 5, what="every ack written")
    waits = [at - added[o] for _, runs, at in written.records for s, n in runs for o in range(s, s + n)]
    assert max(waits) < 1.0  # would be ~0.05 s on an idle machine: the writer never lets a round grow old
    assert len(written.records) > 2  # several rounds, not one at the end
    batcher.close()


def test_flush_and_close_write_everything_at_once() -> None:
    written = Written()
    batcher = EndBatcher(written, end_flush_ms=3_600_000)
    batcher.add(2, 10)
    batcher.flush()
    assert [(p, runs) for p, runs, _ in written.records] == [(2, ((10, 1),))]
    batcher.add(2, 12)
    batcher.close()
    batcher.close()
    assert [(p, runs) for p, runs, _ in written.records][1:] == [(2, ((12, 1),))]


def test_a_failing_write_does_not_stop_later_rounds() -> None:
    calls: list[int] = []

    def write(partition: int, runs: tuple[Run, ...]) -> None:
        calls.append(partition)
        if len(calls) == 1:
            raise RuntimeError("broker said no")

    batcher = EndBatcher(write, end_flush_ms=20)
    batcher.add(0, 1)
    wait_for(lambda: len(calls) == 1, 5)
    batcher.add(0, 2)
    wait_for(lambda: len(calls) == 2, 5, what="the second round after a failure")
    batcher.close()


def test_partitions_and_offsets_come_out_as_they_went_in_whatever_their_size() -> None:
    written = Written()
    batcher = EndBatcher(written, end_flush_ms=3_600_000)
    big_offset = 2**63 - 10  # the largest Kafka offsets
    for partition, offset in [(2**31 - 1, 7), (0, big_offset), (0, big_offset + 1), (3, 0), (3, 2), (3, 2)]:
        batcher.add(partition, offset)
    batcher.flush()
    assert sorted((p, runs) for p, runs, _ in written.records) == [
        (0, ((big_offset, 2),)),
        (3, ((0, 1), (2, 1))),
        (2**31 - 1, ((7, 1),)),
    ]
    batcher.close()


def test_acks_the_hold_names_wait_for_a_later_round_and_the_rest_go_now() -> None:
    written = Written()
    in_flight = {1: [(11, 12), (14, 20)], 2: [(0, 5), (3, 9)]}  # STARTs not acknowledged yet (ranges may overlap)
    batcher = EndBatcher(written, end_flush_ms=3_600_000, hold=lambda partition: in_flight.get(partition, []))
    for partition, offsets in {0: [4], 1: [10, 11, 12, 13, 20, 21], 2: [6, 9, 10]}.items():
        for offset in offsets:
            batcher.add(partition, offset)
    batcher.flush()
    assert sorted((p, runs) for p, runs, _ in written.records) == [
        (0, ((4, 1),)),
        (1, ((10, 1), (13, 1), (21, 1))),
        (2, ((10, 1),)),
    ]
    in_flight.clear()
    batcher.flush()
    assert sorted((p, runs) for p, runs, _ in written.records[3:]) == [(1, ((11, 2), (20, 1))), (2, ((6, 1), (9, 1)))]
    batcher.close()
