"""Java and Maven for the JVM-based backends: finding them, checking the version, resolving jars into a cache.

Jars are resolved once by the machine's `mvn` into `~/.cache/kmq/<name>/<version>/lib` (override the root with
`KMQ_CACHE_DIR`); later starts read that folder and need neither Maven nor the network.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kmq.errors import EmbeddedBrokerError

_log = logging.getLogger(__name__)
MIN_JAVA = 17
FALLBACK_HINT = "`--backend tansu` (KMQ_TEST_BACKEND=tansu for the tests) needs neither Java nor Maven"
_COMPLETE = ".complete"
_RESOLVE_TIMEOUT_S = 900
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kmq.embedded</groupId><artifactId>{name}</artifactId><version>{version}</version>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
_DEPENDENCY = "    <dependency><groupId>{0}</groupId><artifactId>{1}</artifactId><version>{2}</version></dependency>"


def cache_root() -> Path:
    """Where kmq keeps what it downloads: `KMQ_CACHE_DIR`, else `$XDG_CACHE_HOME/kmq`, else `~/.cache/kmq`."""
    explicit = os.environ.get("KMQ_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kmq"


def java_binary() -> str:
    """The `java` to run (`$JAVA_HOME/bin/java`, else the PATH's), checked to be Java 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    candidate = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not candidate or not os.access(candidate, os.X_OK):
        raise EmbeddedBrokerError(f"no `java` found (install Java {MIN_JAVA}+ or set JAVA_HOME); {FALLBACK_HINT}")
    major = java_major_version(candidate)
    if major < MIN_JAVA:
        raise EmbeddedBrokerError(
            f"{candidate} is Java {major}; Apache Kafka needs Java {MIN_JAVA}+ (set JAVA_HOME); {FALLBACK_HINT}"
        )
    return candidate


def java_major_version(java: str) -> int:
    """The major version `java -version` reports (`1.8.0_x` is 8, `17.0.15` is 17)."""
    try:
        shown = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False).stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EmbeddedBrokerError(f"could not run {java} -version: {e}; {FALLBACK_HINT}") from e
    found = re.search(r'version "(\d+)(?:\.(\d+))?', shown)
    if found is None:
        raise EmbeddedBrokerError(f"cannot tell the Java version from `{java} -version`: {shown.strip()!r}")
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def jvm_available() -> bool:
    """Java 17+ and mvn are both here (the condition for the real-Kafka backend to be the default)."""
    if shutil.which("mvn") is None:
        return False
    try:
        java_binary()
    except EmbeddedBrokerError:
        return False
    return True


def resolve_jars(name: str, version: str, artifacts: Sequence[str]) -> list[Path]:
    """The jars of `artifacts` (`group:artifact:version`) and their dependencies, resolved once into the cache."""
    lib = cache_root() / name / version / "lib"
    if not (lib / _COMPLETE).is_file():
        _resolve(name, version, artifacts, lib)
    return sorted(lib.glob("*.jar"))


def _resolve(name: str, version: str, artifacts: Sequence[str], lib: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EmbeddedBrokerError(
            f"resolving {name} {version} from Maven Central needs `mvn` (apt-get install maven); {FALLBACK_HINT}"
        )
    _log.warning("resolving %s %s from Maven Central into %s (first start only)", name, version, lib)
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent, prefix=".resolve-") as work:
        staging = Path(work) / "lib"
        pom = Path(work) / "pom.xml"
        dependencies = "\n".join(_DEPENDENCY.format(*artifact.split(":")) for artifact in artifacts)
        pom.write_text(_POM.format(name=name, version=version, dependencies=dependencies))
        argv = [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={staging}"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=_RESOLVE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as e:
            raise EmbeddedBrokerError(f"mvn did not resolve {', '.join(artifacts)} in {_RESOLVE_TIMEOUT_S}s") from e
        if done.returncode != 0:
            raise EmbeddedBrokerError(_resolution_failure(artifacts, done.stdout + done.stderr))
        (staging / _COMPLETE).write_text("\n".join(artifacts) + "\n")
        shutil.rmtree(lib, ignore_errors=True)
        staging.rename(lib)


def _resolution_failure(artifacts: Sequence[str], output: str) -> str:
    lines = [line for line in output.splitlines() if "ERROR" in line] or output.splitlines()
    missing = [artifact for artifact in artifacts if artifact.split(":")[1] in output]
    named = ", ".join(missing or artifacts)
    detail = "\n".join(lines[-8:])
    return (
        f"mvn could not resolve {named} from Maven Central (is it served? check with "
        f"`mvn dependency:get -Dartifact={(missing or artifacts)[0]}`); set KMQ_KAFKA_VERSION to a version that "
        f"resolves, or use {FALLBACK_HINT.split(' needs')[0]}.\n{detail}"
    )
