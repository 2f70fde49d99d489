"""The pure parts of kmq.spark's stream path: Java client options, micro-batch offsets, not-ok rows, the executors'
Python."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmq.batch_markers import offsets_in, runs_of
from kmq.config import KmqConfig
from kmq.errors import AckInputError, ConfigError
from kmq.spark import python_exec
from kmq.spark.acking import Ack
from kmq.spark.batch_offsets import contains, ends_of, without
from kmq.spark.java_kafka import java_kafka_options
from kmq.spark.not_ok import _check
from kmq.spark.stream import kafka_source_options, stream_options


def test_security_settings_become_the_java_clients_and_the_password_only_its_jaas_config(tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text('s3cr"et\n')
    options = stream_options("orders", {"bootstrap.servers": "k:9093", "kafka.security.protocol": "sasl_ssl",
                                        "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.username": "app",
                                        "kafka.ssl.ca.location": "/ca.pem", "sasl_password_file": str(password),
                                        "kafka.ssl.endpoint.identification.algorithm": "none",
                                        "kafka.client.id": "me", "max_records_per_batch": 500})  # fmt: skip
    java = java_kafka_options(options.config)
    assert java == {
        "kafka.bootstrap.servers": "k:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="app" '
        'password="s3cr\\"et";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/ca.pem",
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.client.id": "me",
    }
    source = kafka_source_options(options, {1: 7, 0: 3})
    assert source["startingOffsets"] == '{"orders": {"0": 3, "1": 7}}'
    assert (source["subscribe"], source["kafka.isolation.level"], source["includeHeaders"]) == (
        "orders", "read_committed", "true")  # fmt: skip
    assert source["maxOffsetsPerTrigger"] == "500"
    # the password is in no other option, nor in the config's repr (what a log line would show)
    assert [k for k, v in source.items() if "s3cr" in v] == ["kafka.sasl.jaas.config"]
    assert "s3cr" not in repr(options)


def test_a_mechanism_without_a_password_login_is_named() -> None:
    config = KmqConfig(bootstrap_servers="k:1", queue_topic="q", sasl_mechanism="GSSAPI", sasl_username="u")
    with pytest.raises(ConfigError, match="not GSSAPI"):
        java_kafka_options(config)


offset_sets = st.dictionaries(st.integers(0, 3), st.sets(st.integers(0, 200), min_size=1), min_size=1)


@given(offset_sets, st.data())
def test_runs_less_the_not_ok_rows_are_the_other_offsets(sets: dict[int, set[int]], data: st.DataObject) -> None:
    runs = {p: runs_of(offsets) for p, offsets in sets.items()}
    removed = {(p, o) for p, offsets in sets.items() for o in data.draw(st.sets(st.sampled_from(sorted(offsets))))}
    left = without(runs, removed)
    expected = {p: {o for o in offsets if (p, o) not in removed} for p, offsets in sets.items()}
    assert {p: set(offsets_in(r)) for p, r in left.items()} == {p: o for p, o in expected.items() if o}
    for p, offsets in sets.items():
        assert all(contains(runs[p], o) for o in offsets)
        assert not any(contains(runs[p], o) for o in range(-1, 202) if o not in offsets)
    assert ends_of(runs) == {p: max(offsets) + 1 for p, offsets in sets.items()}


def test_not_ok_rows_must_be_retry_or_reject_rows_of_the_batch_each_once() -> None:
    runs = {0: ((10, 5),), 1: ((0, 2), (4, 1))}
    _check([Ack(0, 12, "retry"), Ack(1, 4, "reject")], runs)
    with pytest.raises(AckInputError, match=r"status 'ok' among the not-ok rows"):
        _check([Ack(0, 12, "ok")], runs)
    with pytest.raises(AckInputError, match=r"partition=1, offset=3\) is not a row of this micro-batch"):
        _check([Ack(1, 3, "retry")], runs)
    with pytest.raises(AckInputError, match="twice"):
        _check([Ack(0, 12, "retry"), Ack(0, 12, "reject")], runs)


def _context(master: str, python: str) -> SimpleNamespace:
    return SimpleNamespace(sparkContext=SimpleNamespace(master=master, pythonExec=python))


def test_a_local_masters_workers_run_the_drivers_python_unless_one_was_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    spark = _context("local[2]", "python3")  # PySpark's default when PYSPARK_PYTHON is unset
    python_exec.ensure_python(spark)
    assert spark.sparkContext.pythonExec == sys.executable
    cluster = _context("spark://master:7077", "python3")  # a cluster's executors are the deployment's
    python_exec.ensure_python(cluster)
    assert cluster.sparkContext.pythonExec == "python3"


def test_a_chosen_python_that_cannot_import_kmq_fails_at_once_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-python")
    monkeypatch.setenv("PYSPARK_PYTHON", missing)
    with pytest.raises(ConfigError, match=rf"PYSPARK_PYTHON: .*Set PYSPARK_PYTHON={sys.executable}"):
        python_exec.ensure_python(_context("local[2]", missing))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable + "-twin")  # chosen, and it can import kmq: kept
    monkeypatch.setattr(python_exec, "imports_kmq", lambda python: "")
    spark = _context("local[*]", sys.executable + "-twin")
    python_exec.ensure_python(spark)
    assert spark.sparkContext.pythonExec == sys.executable + "-twin"
