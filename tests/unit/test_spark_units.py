"""The pure parts of kmq.spark: options, ack rows, marker rows, the report, the bench figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kmq.batch_markers import BatchEnd, BatchStart
from kmq.bench.spark_master import parse_master
from kmq.errors import AckInputError, ConfigError
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq.spark.acking import parse
from kmq.spark.markers_source import decode
from kmq.spark.options import SourceOptions
from kmq.spark.report import report_from_rows


def test_options_build_a_config_and_name_a_bad_one() -> None:
    options = SourceOptions.parse(
        {
            "bootstrap.servers": "k:9092",
            "queue": "orders",
            "kafka.security.protocol": "SSL",
            "max_records_per_batch": "5",
        }
    )
    assert options.config.markers_topic == "orders__markers"
    assert options.config.kafka_config == {"security.protocol": "SSL"}
    assert options.max_records_per_batch == 5
    assert options.max_rows_per_task == 100_000
    with pytest.raises(ConfigError, match="queue"):
        SourceOptions.parse({"bootstrap.servers": "k:9092"})
    with pytest.raises(ConfigError, match="max_records_per_batch"):
        SourceOptions.parse({"bootstrap.servers": "k:9092", "queue": "q", "max_records_per_batch": "many"})
    with pytest.raises(ConfigError, match="quue"):
        SourceOptions.parse({"bootstrap.servers": "k:9092", "queue": "q", "quue": "x"})


def test_the_marker_format_option_reaches_the_config_the_executors_write_with() -> None:
    given = {"bootstrap.servers": "k:9092", "queue": "q"}
    assert SourceOptions.parse(given).config.marker_format == "batch"  # KmqConfig's default, as every kmq client
    assert SourceOptions.parse({**given, "marker_format": "kmq"}).config.marker_format == "kmq"
    with pytest.raises(ConfigError, match="marker_format"):
        SourceOptions.parse({**given, "marker_format": "bulk"})


def test_a_sasl_password_reaches_the_config_as_kmq_audit_passes_it_or_from_a_file(tmp_path: Path) -> None:
    sasl = {"bootstrap.servers": "b:9092", "queue": "orders", "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.username": "app"}  # fmt: skip
    config = SourceOptions.parse({**sasl, "kafka.sasl.password": "s3cret"}).config
    assert config.kafka_settings()["sasl.password"] == "s3cret" and "s3cret" not in repr(config)
    secret = tmp_path / "password"
    secret.write_text("from-a-file\n")
    from_file = SourceOptions.parse({**sasl, "sasl_password_file": str(secret)}).config
    assert from_file.kafka_settings()["sasl.password"] == "from-a-file"


def test_ack_rows_are_checked() -> None:
    assert parse({"partition": 1, "offset": 7, "status": "retry", "delay_ms": 50}).delay_ms == 50
    with pytest.raises(AckInputError, match="'done' is not one of ok, retry, reject"):
        parse({"partition": 1, "offset": 7, "status": "done"})
    with pytest.raises(AckInputError, match="'offset' is null"):
        parse({"partition": 1, "offset": None, "status": "ok"})
    with pytest.raises(AckInputError, match="delay_ms"):
        parse({"partition": 1, "offset": 7, "status": "retry", "delay_ms": -1})


def test_marker_records_become_rows_and_anything_else_is_invalid() -> None:
    key = MarkerKey(2, 40).encode()
    assert decode(2, key, StartMarker(500).encode()) == [(2, 40, "start", 500)]
    assert decode(2, key, EndMarker().encode()) == [(2, 40, "end", None)]
    assert decode(3, key, EndMarker().encode()) == [(None, None, "invalid", None)]  # key of another partition
    assert decode(2, key, b"\x07") == [(None, None, "invalid", None)]
    assert decode(2, None, b"\x00") == [(None, None, "invalid", None)]


def test_batch_markers_become_one_row_per_offset_of_their_set() -> None:
    key = MarkerKey(2, 40).encode()
    start = BatchStart(900, ((40, 2), (45, 1))).encode()
    assert decode(2, key, start) == [(2, 40, "start", 900), (2, 41, "start", 900), (2, 45, "start", 900)]
    assert decode(2, key, BatchEnd(((40, 1),)).encode()) == [(2, 40, "end", None)]
    assert [row[1] for row in decode(2, MarkerKey(2, 100).encode(), start)] == [100, 101, 105]  # runs follow the key
    assert decode(2, key, start[:-1]) == [(None, None, "invalid", None)]  # a broken rule: not a marker


def test_the_report_totals_partitions() -> None:
    row = dict(messages=3, first_deliveries=2, redelivered_copies=1, acked=1, pending=0, oldest_pending_age_ms=None,
               dead_lettered=1, max_redelivery_count=1, unaccounted=0, unconsumed=0, committed_offset=3,
               dead_reasons={"rejected: x": 1})  # fmt: skip
    report = report_from_rows("q", [{**row, "partition": 1}, {**row, "partition": 0, "unaccounted": 2}])
    assert [p.partition for p in report.partitions] == [0, 1]
    assert report.total("messages") == 6
    assert report.dead_reasons == {"rejected: x": 2}
    assert not report.ok
    assert json.loads(report.to_json())["totals"]["unaccounted"] == 2


def test_arrow_ack_batches_keep_ok_rows_as_offsets_per_partition_and_check_the_rest() -> None:
    import pyarrow as pa

    from kmq.spark.acking import parse_batches

    batch = pa.RecordBatch.from_pydict(
        {"partition": [0, 1, 1], "offset": [5, 6, 7], "status": ["ok", "retry", "ok"], "delay_ms": [None, 20, None]}
    )
    ends, others = parse_batches([batch, batch])
    assert ends.by_partition() == {0: [5], 1: [7]}  # ascending, each offset once
    assert ends.rows == 4
    assert [(a.partition, a.offset, a.status, a.delay_ms) for a in others] == [(1, 6, "retry", 20)] * 2
    unordered = pa.RecordBatch.from_pydict({"partition": [3, 3, 3, 3], "offset": [9, 3, 4, 3], "status": ["ok"] * 4})
    assert parse_batches([unordered])[0].by_partition() == {3: [3, 4, 9]}
    with pytest.raises(AckInputError, match="'status' is null"):
        parse_batches(
            [pa.RecordBatch.from_pydict({"partition": [0], "offset": [1], "status": pa.array([None], pa.string())})]
        )
    bad = pa.RecordBatch.from_pydict({"partition": [0], "offset": [None], "status": ["ok"]})
    with pytest.raises(AckInputError, match="'offset' is null"):
        parse_batches([batch, bad])


def test_a_worker_keeps_one_marker_producer_per_role_until_a_failure_discards_it() -> None:
    from kmq.config import KmqConfig
    from kmq.spark.clients import discard, marker_producer

    config = KmqConfig(bootstrap_servers="127.0.0.1:1", queue_topic="q")
    starts = marker_producer(config, "starts")
    assert marker_producer(config, "starts") is starts  # the next task of this worker: no new producer id
    assert marker_producer(config, "acks") is not starts  # STARTs and acks never share one
    assert marker_producer(config.model_copy(update={"queue_topic": "other"}), "starts") is starts  # same cluster
    discard(config, "starts")
    assert marker_producer(config, "starts") is not starts
    discard(config, "starts")
    discard(config, "acks")


def test_the_spark_bench_ratio_is_the_median_of_each_rounds_ratio() -> None:
    from kmq.spark.bench import SparkBenchResult
    from kmq.spark.bench_figures import SparkRun

    def run(rate: float) -> SparkRun:  # 1 000 rows in 1 000 / rate s end to end, twice as fast after the first batch
        return SparkRun(rows=1_000, elapsed_ms=round(1_000_000 / rate), batches=2, steady_rows=500,
                        steady_ms=round(250_000 / rate))  # fmt: skip

    result = SparkBenchResult(
        {"spark-kafka": [run(100), run(200), run(400)], "spark-kmq": [run(50), run(150), run(100)]}
    )
    assert result.round_ratios("end_to_end") == pytest.approx([0.5, 0.75, 0.25], rel=1e-3)
    assert result.ratio("end_to_end") == pytest.approx(0.5)
    assert result.rates("spark-kmq", "steady") == pytest.approx([100.0, 300.0, 200.0], rel=1e-3)
    assert result.ratio("steady") == pytest.approx(0.5, rel=1e-3)


def test_the_steady_state_counts_the_micro_batches_after_the_first_that_read_rows() -> None:
    from kmq.spark.bench_figures import run_from_progress

    progress = [  # as StreamingQueryProgress (a dict): batch 0 pays the start-up, batch 3 read nothing
        {"batchId": 1, "numInputRows": 200, "batchDuration": 100},
        {"batchId": 0, "numInputRows": 200, "batchDuration": 900},
        {"batchId": 2, "numInputRows": 100, "batchDuration": 50},
        {"batchId": 3, "numInputRows": 0, "batchDuration": 5},
    ]
    run = run_from_progress(progress, elapsed_ms=2_000)
    assert (run.rows, run.batches, run.steady_rows, run.steady_ms) == (500, 3, 300, 150)
    assert run.batch_ms == (900, 100, 50)  # in batch order, as the JSON lists them
    assert run.rate("end_to_end") == 250.0
    assert run.rate("steady") == 2_000.0
    one_batch = run_from_progress(progress[1:2], elapsed_ms=1_000)
    assert one_batch.rate("end_to_end") == 200.0
    assert math.isnan(one_batch.rate("steady"))  # no steady state to report, not a made-up figure


def test_the_spark_bench_json_has_both_ratios_of_every_round_and_no_nan() -> None:
    from kmq.spark.bench import SparkBenchResult
    from kmq.spark.bench_cli import spark_report_dict
    from kmq.spark.bench_figures import SparkRun

    one_batch = SparkRun(rows=1_000, elapsed_ms=1_000, batches=1, steady_rows=0, steady_ms=0)
    two_batches = SparkRun(rows=1_000, elapsed_ms=2_000, batches=2, steady_rows=500, steady_ms=100)
    result = SparkBenchResult({"spark-kafka": [one_batch, two_batches], "spark-kmq": [two_batches, two_batches]})
    data = spark_report_dict(result, "kmq bench", {"messages": 1_000})
    assert data["ratios"]["end_to_end"] == {"median": 0.75, "rounds": [0.5, 1.0]}
    assert data["ratios"]["steady"] == {"median": 1.0, "rounds": [None, 1.0]}
    assert data["runs"]["spark-kmq"][0]["steady_rows"] == 500
    json.dumps(data, allow_nan=False)


@pytest.mark.parametrize("text", ["local", "local[2]", "local[*]", "local[2,3]", "spark://127.0.0.1:7077",
                                  "spark://a:7077,b:7077", " standalone "])  # fmt: skip
def test_bench_master_accepts_local_cluster_urls_and_standalone(text: str) -> None:
    master = parse_master(text)
    assert master.url == text.strip()
    assert master.standalone == (text.strip() == "standalone")
    assert master.local == text.startswith("local")


@pytest.mark.parametrize("text", ["", "local[0]", "local[two]", "spark://", "spark://host", "yarn", "standalone2",
                                  "http://127.0.0.1:7077"])  # fmt: skip
def test_bench_master_refuses_anything_else_naming_the_option(text: str) -> None:
    with pytest.raises(ConfigError, match="--master"):
        parse_master(text)
