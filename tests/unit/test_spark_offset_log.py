"""Spark's offset log read by kmq: the files a real query of Spark 4.2.0 (the version the `spark` extra pins) wrote
with Spark's Kafka source, kept under tests/data (tests/integration/spark/test_spark_stream.py checks the same
parsing against the files of the query it runs), and the refusals of what kmq does not read."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmq.errors import ConfigError, OffsetLogError
from kmq.spark.offset_log import ReadFile, batch_ranges, parse_initial_offsets, parse_offset_log

CHECKPOINT = Path(__file__).resolve().parents[1] / "data" / "spark-4.2.0-checkpoint"
TOPIC = "t-test_no_row_reaches_the_handler_before_its_start_is_durable_and_the_starts_are_t-acecd2fc"


def files(overrides: dict[str, str | None] | None = None) -> ReadFile:
    def read(relative: str) -> str | None:
        if overrides is not None and relative in overrides:
            return overrides[relative]
        path = CHECKPOINT / relative
        return path.read_text() if path.exists() else None

    return read


def test_the_ranges_of_each_batch_are_the_previous_ends_to_its_own() -> None:
    read = files()
    assert batch_ranges(read, 0, TOPIC, lambda p: 0) == {0: (0, 10), 1: (0, 10)}
    assert batch_ranges(read, 1, TOPIC, lambda p: 0) == {0: (10, 20), 1: (10, 20)}
    assert batch_ranges(read, 2, TOPIC, lambda p: 0) == {0: (20, 30), 1: (20, 30)}


def test_the_first_batch_starts_at_the_sources_initial_offsets_written_with_a_leading_zero_byte() -> None:
    text = (CHECKPOINT / "sources" / "0" / "0").read_text()
    assert text.startswith("\x00v1\n")
    assert parse_initial_offsets(text, "sources/0/0") == {TOPIC: {"0": 0, "1": 0}}


def test_a_partition_the_starts_do_not_name_starts_at_its_log_start_and_empty_ranges_are_left_out() -> None:
    ends = "v1\n{}\n" + '{"q":{"0":5,"1":7,"2":4,"3":0}}'
    starts = "v1\n{}\n" + '{"q":{"0":5,"1":3}}'
    read = files({"offsets/4": ends, "offsets/3": starts})
    assert batch_ranges(read, 4, "q", lambda p: 2) == {1: (3, 7), 2: (2, 4)}


def test_the_kafka_source_is_found_among_the_querys_sources() -> None:
    ends = 'v1\n{}\n-\n{"other":{"0":1}}\n{"q":{"0":9}}\n'
    logged = parse_offset_log(ends, "offsets/1")
    assert logged.sources == (None, {"other": {"0": 1}}, {"q": {"0": 9}})
    # a source with no offsets logged in the previous batch ("-") starts at its initial offsets
    previous = 'v1\n{}\n-\n{"other":{"0":1}}\n-'
    read = files({"offsets/1": ends, "offsets/0": previous, "sources/2/0": '\x00v1\n{"q":{"0":4}}'})
    assert batch_ranges(read, 1, "q", lambda p: 0) == {0: (4, 9)}


def test_what_kmq_does_not_read_is_refused_naming_the_file() -> None:
    with pytest.raises(OffsetLogError, match=r"offsets/7: offset log version 'v2'"):
        parse_offset_log('v2\n{}\n{"q":{}}', "offsets/7")
    with pytest.raises(OffsetLogError, match=r"offsets/3: not in the checkpoint"):
        batch_ranges(files({"offsets/3": None}), 3, TOPIC, lambda p: 0)
    with pytest.raises(OffsetLogError, match=r"offsets/1: not in the checkpoint: the batch's start offsets"):
        batch_ranges(files({"offsets/1": None}), 2, TOPIC, lambda p: 0)
    with pytest.raises(OffsetLogError, match=r"0 sources of the query read 'elsewhere'"):
        batch_ranges(files(), 1, "elsewhere", lambda p: 0)
    with pytest.raises(OffsetLogError, match=r"not JSON"):
        parse_offset_log("v1\n{}\n{not json", "offsets/0")


def test_foreach_batch_refuses_the_kmq_marker_format_with_the_fix() -> None:
    import kmq.spark

    with pytest.raises(ConfigError, match=r"marker_format.*BATCH markers only.*leave marker_format out"):
        kmq.spark.foreach_batch(
            lambda batch, batch_id: None, "q", **{"bootstrap.servers": "x:1", "marker_format": "kmq"}
        )
