"""kmq bench's targets: the speed goals, each met, missed or not measured, from ratios within rounds."""

from __future__ import annotations

from kmq.bench.options import (
    HTTP,
    KMQ,
    KMQ_BATCH,
    PLAIN,
    PLAIN_ASYNC,
    SHARE,
    TRACKER,
    WORKER,
    WORKER_KEY,
    variant,
)
from kmq.bench.results import Run, rows
from kmq.bench.targets import targets

EVERY_GOAL = {
    "kmq-batch ÷ plain throughput": (">=", 0.90),
    "kmq-batch ÷ share-group throughput": (">=", 1.0),
    "kmq-batch ÷ plain-async throughput": (">=", 0.5),
    "kmq ÷ plain throughput": (">=", 0.5),
    "kmq-batch ÷ plain CPU per message": ("<=", 1.3),
    "kmq-batch ÷ plain throughput, handlers burning 20 µs/msg": (">=", 0.97),
    "http receive+ack": (">=", 15_000),
    "http ack p99": ("<=", 20.0),
    "worker ÷ kmq-batch throughput": (">=", 0.8),
    "worker-key ÷ worker throughput": (">=", 0.9),
    "tracker queue offsets ingested": (">=", 100_000),
    "tracker RSS, 1,000,000 pending": ("<=", 150),
    "tracker redelivery lateness p99": ("<=", 250.0),
}


def consumer(contender: str, round_: int, rate: float, cpu_us: float = 2.0) -> Run:
    return Run(contender, round_, {"msgs_per_s": rate, "cpu_us_per_msg": cpu_us})


def statuses(runs: list[Run], contenders: list[str]) -> dict[str, str]:
    return {t.name: t.status for t in targets(runs, rows(runs, contenders, {}), 1_000_000)}


def test_the_targets_are_exactly_the_goals_and_none_other() -> None:
    found = {t.name: (t.comparison, t.limit) for t in targets([], [], 1_000_000)}
    assert found == EVERY_GOAL


def test_nothing_run_means_nothing_measured() -> None:
    assert set(statuses([], [])) == set(EVERY_GOAL)
    assert set(statuses([], []).values()) == {"not measured"}


def test_ratios_come_from_the_same_round_and_their_median_decides() -> None:
    # The machine's speed changes from round to round; the ratios within the rounds are 0.95, 0.95, 0.5.
    runs = [consumer(PLAIN, 0, 1000), consumer(KMQ_BATCH, 0, 950)]
    runs += [consumer(PLAIN, 1, 2000), consumer(KMQ_BATCH, 1, 1900)]
    runs += [consumer(PLAIN, 2, 400), consumer(KMQ_BATCH, 2, 200)]
    assert statuses(runs, [PLAIN, KMQ_BATCH])["kmq-batch ÷ plain throughput"] == "met"
    runs[3] = consumer(KMQ_BATCH, 1, 1000)  # 0.95, 0.5, 0.5: median 0.5, though the median rates give 0.95
    assert statuses(runs, [PLAIN, KMQ_BATCH])["kmq-batch ÷ plain throughput"] == "missed"


def test_every_throughput_goal_against_its_own_reference() -> None:
    runs = [
        consumer(PLAIN, 0, 1000, cpu_us=2.0),
        consumer(PLAIN_ASYNC, 0, 2000),
        consumer(KMQ, 0, 400),
        consumer(KMQ_BATCH, 0, 920, cpu_us=2.5),
        consumer(SHARE, 0, 1000),
        consumer(WORKER, 0, 700),
        consumer(WORKER_KEY, 0, 650),
    ]
    found = statuses(runs, [PLAIN, PLAIN_ASYNC, KMQ, KMQ_BATCH, SHARE, WORKER, WORKER_KEY])
    assert found["kmq-batch ÷ plain throughput"] == "met"  # 0.92
    assert found["kmq-batch ÷ share-group throughput"] == "missed"  # 0.92
    assert found["kmq-batch ÷ plain-async throughput"] == "missed"  # 0.46
    assert found["kmq ÷ plain throughput"] == "missed"  # 0.4
    assert found["kmq-batch ÷ plain CPU per message"] == "met"  # 1.25
    assert found["worker ÷ kmq-batch throughput"] == "missed"  # 0.76
    assert found["worker-key ÷ worker throughput"] == "met"  # 0.93
    assert found["kmq-batch ÷ plain throughput, handlers burning 20 µs/msg"] == "not measured"


def test_the_work_goal_compares_the_20_us_variants_only() -> None:
    plain, batch = variant(PLAIN, 20), variant(KMQ_BATCH, 20)
    runs = [consumer(PLAIN, 0, 1000), consumer(KMQ_BATCH, 0, 500), consumer(plain, 0, 40_000)]
    runs.append(consumer(batch, 0, 39_000))
    found = statuses(runs, [PLAIN, KMQ_BATCH, plain, batch])
    assert found["kmq-batch ÷ plain throughput, handlers burning 20 µs/msg"] == "met"  # 0.975
    assert found["kmq-batch ÷ plain throughput"] == "missed"  # 0.5: the runs without work are apart


def test_the_rest_facade_and_the_tracker_goals() -> None:
    runs = [
        Run(HTTP, 0, {"receive_ack_msgs_per_s": 16_000, "ack_ms_p99": 25.0}),
        Run(TRACKER, 0, {"offsets_per_s": 90_000, "rss_bytes": 120_000_000, "lateness_ms_p99": 200.0}),
    ]
    found = statuses(runs, [HTTP, TRACKER])
    assert (found["http receive+ack"], found["http ack p99"]) == ("met", "missed")
    assert found["tracker queue offsets ingested"] == "missed"
    assert (found["tracker RSS, 1,000,000 pending"], found["tracker redelivery lateness p99"]) == ("met", "met")


def test_the_worker_goals_are_checked_at_every_handler_work_the_run_had() -> None:
    runs = [consumer(KMQ_BATCH, 0, 1000), consumer(WORKER, 0, 500)]
    runs += [consumer(variant(KMQ_BATCH, 50), 0, 100), consumer(variant(WORKER, 50), 0, 90)]
    found = statuses(runs, [KMQ_BATCH, WORKER, variant(KMQ_BATCH, 50), variant(WORKER, 50)])
    assert found["worker ÷ kmq-batch throughput"] == "missed"  # 0.5
    assert found["worker ÷ kmq-batch throughput, handlers burning 50 µs/msg"] == "met"  # 0.9
    assert found["worker-key ÷ worker throughput, handlers burning 50 µs/msg"] == "not measured"
