"""What a process pays to import kmq: the package's public names load on first use, and the Spark source's Python
workers (spawned by Spark for the batch sources and the not-ok rows' acks) import only what they need."""

from __future__ import annotations

import subprocess
import sys

import pytest

import kmq


def _loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter has loaded after `statement` (this process has imported everything)."""
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    return set(done.stdout.split())


def test_every_public_name_of_kmq_resolves_to_its_module() -> None:
    for name in kmq.__all__:
        value = getattr(kmq, name)
        assert getattr(value, "__name__", name) == name
    assert set(kmq.__all__) <= set(dir(kmq))
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = kmq.missing  # type: ignore[attr-defined]  # the failure under test


def test_importing_kmq_loads_no_client() -> None:
    loaded = _loaded_after("import kmq")
    assert not {"confluent_kafka", "pydantic", "kmq.client", "kmq.worker"} & loaded


def test_the_spark_python_workers_paths_leave_the_client_worker_and_admin_out() -> None:
    loaded = _loaded_after("import kmq.spark.source, kmq.spark.ack_sink")  # batch reads, the not-ok rows' acks
    assert {"kmq.spark.reading", "kmq.spark.acking"} <= loaded  # the test sees the modules it is about
    unwanted = {"kmq.client", "kmq.worker", "kmq.producer", "kmq.admin", "kmq.spark.positions", "pydantic_settings"}
    assert not unwanted & loaded
