"""SoftwareMill's JVM kmq as child processes: the harness of tests/interop, used by the tests and `kmq bench`.

`tests/interop/pom.xml` names the JVM kmq release and a logging binding; `JvmKmq.classpath()` resolves it once with
`mvn dependency:build-classpath` into a per-user cache (`~/.cache/kmq/interop/<hash of the pom>/classpath.txt`), so a
second run needs no network. `JvmKmq.start(mode, ...)` runs `java -cp <classpath> Interop.java <mode> ...` (a
single-file source launch: nothing is built) as a `ChildProcess` that dies with this process.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from kmq.embedded._child import ChildProcess
from kmq.embedded._jvm import cache_root, java_binary
from kmq.errors import EmbeddedBrokerError, JvmKmqError

# The harness lives in the test tree of a source checkout (the bench uses it from there too).
INTEROP_DIR = Path(__file__).resolve().parent.parent / "tests" / "interop"
# Settings of every JVM client: a fast group join and short fetch waits (Kafka's defaults take seconds).
JAVA_CLIENT_CONFIG: Mapping[str, str] = {
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "500",
    "fetch.max.wait.ms": "100",
}
_RESOLVE_TIMEOUT_S = 600
_STOP_TIMEOUT_MS = 15_000


def missing_tools() -> str | None:
    """Why the harness cannot run here (no Java 17+, or no mvn), or None."""
    if shutil.which("mvn") is None:
        return "JVM kmq interop needs mvn on PATH (Maven) to resolve tests/interop/pom.xml"
    try:
        java_binary()
    except EmbeddedBrokerError as e:
        return f"JVM kmq interop needs Java 17+: {e}"
    return None


def cache_dir() -> Path:
    return cache_root() / "interop"


class JvmKmq:
    """The harness of `interop_dir`: its class path (resolved once, cached) and its processes."""

    def __init__(self, interop_dir: Path = INTEROP_DIR) -> None:
        self.pom = interop_dir / "pom.xml"
        self.program = interop_dir / "Interop.java"
        if not self.pom.is_file() or not self.program.is_file():
            raise JvmKmqError(f"no JVM kmq harness in {interop_dir}: it needs a source checkout of kmq (tests/interop)")
        self._classpath: str | None = None

    def classpath(self) -> str:
        """The resolved class path; the first call for a pom runs Maven, later ones read the cache."""
        if self._classpath is None:
            cached = cache_dir() / hashlib.sha256(self.pom.read_bytes()).hexdigest()[:16] / "classpath.txt"
            if not _usable(cached):
                _resolve(self.pom, cached)
            self._classpath = cached.read_text().strip()
        return self._classpath

    def start(self, mode: str, options: Mapping[str, object], kafka: Mapping[str, str] | None = None) -> ChildProcess:
        """`Interop.java <mode> --name value ...` with `--config k=v` for each Kafka setting; stdout is its protocol."""
        try:
            java = java_binary()
        except EmbeddedBrokerError as e:
            raise JvmKmqError(str(e)) from e
        argv = [java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
        if mode != "bench":  # C1 only: compiles Interop.java in ~0.7 s instead of ~2.3 s; the bench needs full JIT
            argv.append("-XX:TieredStopAtLevel=1")
        argv += ["-cp", self.classpath(), str(self.program), mode]
        for name, value in options.items():
            argv += [f"--{name}", str(value)]
        for key, value in {**JAVA_CLIENT_CONFIG, **(kafka or {})}.items():
            argv += ["--config", f"{key}={value}"]
        return ChildProcess(f"jvm-kmq-{mode}", argv, control=True)


def expect_line(child: ChildProcess, prefix: str, timeout_ms: int) -> str:
    """The next line of `child` (it must start with `prefix`), else an error with the child's log."""
    line = child.receive(timeout_ms)
    if line is None or not line.startswith(prefix):
        got = "nothing" if line is None else repr(line)
        tail = child.output_tail()
        raise JvmKmqError(f"{child.name} sent {got} instead of {prefix!r} within {timeout_ms} ms:\n{tail}")
    return line


def stop(child: ChildProcess) -> int:
    """Close its stdin and SIGTERM it (the harness then closes its Kafka clients); SIGKILL if it lingers."""
    return child.stop(_STOP_TIMEOUT_MS)


def _usable(cached: Path) -> bool:
    """A cached class path whose jars are all still in the local Maven repository."""
    if not cached.is_file():
        return False
    entries = [entry for entry in cached.read_text().strip().split(os.pathsep) if entry]
    return bool(entries) and all(Path(entry).is_file() for entry in entries)


def _resolve(pom: Path, cached: Path) -> None:
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cached.parent, suffix=".tmp", delete=False) as out:
        partial = Path(out.name)
    argv = ["mvn", "-q", "-B", "-f", str(pom), "dependency:build-classpath", f"-Dmdep.outputFile={partial}"]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=_RESOLVE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        partial.unlink(missing_ok=True)
        raise JvmKmqError(f"resolving the JVM kmq class path ({' '.join(argv)}) failed: {e}") from e
    if result.returncode != 0 or not partial.read_text().strip():
        partial.unlink(missing_ok=True)
        tail = (result.stdout + result.stderr).strip()[-2000:]
        raise JvmKmqError(f"mvn could not resolve {pom} (exit {result.returncode}); Maven Central reachable?\n{tail}")
    partial.replace(cached)
