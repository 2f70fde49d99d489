"""What the kafka backend says when Java or Maven is missing, too old, or cannot resolve a jar."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kmq.embedded import EmbeddedKafka
from kmq.embedded._jvm import java_binary, java_major_version, jvm_available, resolve_jars
from kmq.embedded._kafka import kafka_artifacts, new_cluster_id
from kmq.errors import EmbeddedBrokerError


def fake_java(folder: Path, version_line: str) -> Path:
    """A `bin/java` under `folder` that prints `version_line` as `java -version` does (on stderr)."""
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(0o755)
    return java


def test_no_java_is_a_clear_error_that_points_at_tansu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(EmbeddedBrokerError, match=r"no `java` found.*--backend tansu"):
        java_binary()
    assert not jvm_available()


def test_java_older_than_17_is_refused_naming_the_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_java(tmp_path, 'openjdk version "11.0.22" 2024-01-16')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(EmbeddedBrokerError, match=r"is Java 11; Apache Kafka needs Java 17\+.*--backend tansu"):
        java_binary()
    with pytest.raises(EmbeddedBrokerError, match="is Java 11"):
        EmbeddedKafka("kafka").start()


@pytest.mark.parametrize(
    ("line", "major"),
    [('java version "1.8.0_402"', 8), ('openjdk version "17.0.15" 2025-04-15', 17), ('openjdk version "25"', 25)],
)
def test_java_versions_are_read_in_both_numbering_schemes(tmp_path: Path, line: str, major: int) -> None:
    assert java_major_version(str(fake_java(tmp_path, line))) == major


def test_no_mvn_with_nothing_cached_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KMQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn on it
    with pytest.raises(EmbeddedBrokerError, match=r"needs `mvn`.*--backend tansu"):
        resolve_jars("kafka", "4.4.0", kafka_artifacts("4.4.0"))


@pytest.mark.needs(shutil.which("mvn") is not None, "needs mvn (scripts/test installs it)")
def test_an_artifact_that_does_not_resolve_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KMQ_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(EmbeddedBrokerError, match=r"could not resolve org\.apache\.kafka:kafka_2\.13:0\.0\.1"):
        resolve_jars("kafka", "0.0.1", ["org.apache.kafka:kafka_2.13:0.0.1"])
    assert not list((tmp_path / "cache").glob("kafka/0.0.1/lib/*")), "a failed resolution leaves no half cache"


def test_kafka_lines_get_their_own_logging_binding() -> None:
    assert kafka_artifacts("4.4.0")[1].startswith("org.apache.logging.log4j:log4j-slf4j-impl:")
    assert kafka_artifacts("3.9.2")[1].startswith("org.slf4j:slf4j-reload4j:")


def test_cluster_ids_never_start_with_a_dash_that_the_storage_tool_would_read_as_an_option() -> None:
    draws = iter([b"\xf8" + bytes(15), b"\x00" * 16])  # the first encodes as "-AAA...": drawn again
    assert new_cluster_id(lambda: next(draws)) == "A" * 22
