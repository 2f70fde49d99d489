"""kmq bench's options: the alternating schedule and the checks that refuse runs that cannot work."""

from __future__ import annotations

import pytest

from kmq.bench.options import CONTENDERS, HTTP, KMQ, PLAIN, SHARE, BenchOptions, split_variant, variant
from kmq.errors import ConfigError


def test_contenders_alternate_round_by_round_every_other_round_reversed() -> None:
    options = BenchOptions(contenders=(PLAIN, KMQ, SHARE), repeat=3)
    assert [c for _, c in options.schedule] == [PLAIN, KMQ, SHARE, SHARE, KMQ, PLAIN, PLAIN, KMQ, SHARE]
    assert [r for r, _ in options.schedule] == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_every_contender_runs_by_default_on_embedded_kafka() -> None:
    options = BenchOptions()
    assert (options.contenders, options.broker, options.repeat) == (CONTENDERS, "embedded kafka", 3)
    assert BenchOptions(bootstrap_servers="k1:9092").broker == "k1:9092"


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"messages": 0}, "messages"),
        ({"repeat": 0}, "repeat"),
        ({"batch": 0}, "batch"),
        ({"size": -1}, "size"),
        ({"contenders": ()}, "contenders"),
        ({"contenders": (PLAIN, "kafka-streams")}, "contenders"),
        ({"backend": "redpanda"}, "backend"),
    ],
)
def test_bad_options_name_the_field(fields: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        BenchOptions(**fields)  # type: ignore[arg-type]  # deliberately wrong values


def test_the_mock_broker_is_refused_more_than_it_keeps_per_partition() -> None:
    # The mock drops a partition's oldest data past 5 MiB: the run would wait for messages that are gone.
    with pytest.raises(ConfigError, match="--partitions"):
        BenchOptions(backend="mock", messages=200_000, size=100, partitions=4)
    assert BenchOptions(backend="mock", messages=200_000, size=100, partitions=8).on_mock
    # The same load is fine anywhere else.
    assert not BenchOptions(backend="tansu", messages=200_000, partitions=4).on_mock
    assert not BenchOptions(backend="mock", bootstrap_servers="k:9092", messages=200_000).on_mock


def test_the_http_contender_has_its_own_message_count_and_batch() -> None:
    options = BenchOptions(contenders=(HTTP,))
    assert (options.http_messages, options.http_batch) == (20_000, 100)


def test_every_consumer_contender_runs_at_every_work_value_in_each_round() -> None:
    options = BenchOptions(contenders=(PLAIN, KMQ, HTTP), repeat=2, work_us=(0, 20))
    one_round = [PLAIN, KMQ, "plain@20us", "kmq@20us", HTTP]  # the REST facade has no handler: once a round
    assert options.measured == tuple(one_round)
    assert options.schedule == [(0, name) for name in one_round] + [(1, name) for name in reversed(one_round)]
    assert [split_variant(name) for name in one_round] == [(PLAIN, 0), (KMQ, 0), (PLAIN, 20), (KMQ, 20), (HTTP, 0)]
    assert variant(PLAIN, 0) == PLAIN


@pytest.mark.parametrize("work_us", [(), (-1,), (20, 20)])
def test_work_values_are_distinct_and_not_negative(work_us: tuple[int, ...]) -> None:
    with pytest.raises(ConfigError, match="work_us"):
        BenchOptions(work_us=work_us)
