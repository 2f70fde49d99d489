"""`kmq worker MODULE:FUNCTION` as a real process: SIGTERM with handlers in flight exits 0 and loses nothing; a second
signal exits at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kmq.config import KmqConfig
from kmq.embedded._ports import free_port
from tests.helpers import wait_for
from tests.integration.test_tracker_e2e import running_tracker
from tests.integration.test_worker import send_numbers

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]
HANDLER = textwrap.dedent(
    """
    import os, time

    LOG = os.environ["JOBS_LOG"]

    def note(line):
        with open(LOG, "a") as log:
            log.write(line + "\\n")

    def handle(msg):
        note(f"start {msg.value.decode()}")
        time.sleep(float(os.environ.get("JOB_SECONDS", "0.5")))
        note(f"done {msg.value.decode()}")
    """
)


@contextmanager
def kmq_worker(
    config: KmqConfig, tmp_path: Path, log: Path, *args: str, job_s: float = 0.5
) -> Iterator[subprocess.Popen[str]]:
    env = {**config.to_env(), "JOBS_LOG": str(log), "JOB_SECONDS": str(job_s)}
    with worker_process(tmp_path, HANDLER, env, *args) as process:
        yield process


@contextmanager
def worker_process(tmp_path: Path, handler: str, env: dict[str, str], *args: str) -> Iterator[subprocess.Popen[str]]:
    """`kmq worker jobs:handle ARGS` in `tmp_path`, `handler` as jobs.py; killed on exit if it still runs."""
    (tmp_path / "jobs.py").write_text(handler)
    env = {**os.environ, **env}
    with (tmp_path / "worker.out").open("a") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kmq", "worker", "jobs:handle", *args],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def output(tmp_path: Path) -> str:
    return (tmp_path / "worker.out").read_text()


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return str(response.read().decode())
    except OSError:
        return None


def lines(log: Path, kind: str) -> list[str]:
    if not log.exists():
        return []
    return [line.split(" ", 1)[1] for line in log.read_text().splitlines() if line.startswith(kind + " ")]


def test_sigterm_finishes_in_flight_handlers_exits_0_and_loses_nothing(make_config: MakeConfig, tmp_path: Path) -> None:
    # given a `kmq worker` with 4 handlers of 0.5 s each busy on 60 messages, and a tracker
    config = make_config(partitions=2, msg_timeout_ms=3000)
    send_numbers(config, 60)
    log = tmp_path / "jobs.log"
    port = free_port()
    with running_tracker(config):
        args = ("--concurrency", "4", "--shutdown-grace-ms", "10000", "--metrics-port", str(port))
        with kmq_worker(config, tmp_path, log, *args) as first:
            wait_for(lambda: len(lines(log, "done")) >= 8, 30, what="some messages processed")
            # its metrics are served on --metrics-port
            metrics = wait_for(lambda: _get(f"http://127.0.0.1:{port}/metrics"), 10, what="/metrics")
            assert "kmq_worker_processed_total" in metrics and "kmq_worker_breaker_state" in metrics
            # when it gets SIGTERM while handlers run
            first.send_signal(signal.SIGTERM)
            code = first.wait(30)
        # then it exits 0, every handler it had started finished
        said = output(tmp_path)
        assert code == 0, said
        assert "finishing in-flight messages" in said and "worker stopped cleanly" in said, said
        started, finished = lines(log, "start"), lines(log, "done")
        assert Counter(started) == Counter(finished), "a handler was cut off"
        assert 8 <= len(finished) < 60
        # and a second worker gets everything else (the unstarted prefetch comes back at once), nothing twice
        with kmq_worker(config, tmp_path, log, "--concurrency", "8", job_s=0.01) as second:
            wait_for(lambda: len(set(lines(log, "done"))) == 60, 60, what="every message processed")
            second.send_signal(signal.SIGINT)
            assert second.wait(30) == 0
    done = Counter(lines(log, "done"))
    assert set(done) == {str(i) for i in range(60)}
    assert [value for value, times in done.items() if times > 1] == []


def test_a_second_signal_exits_at_once(make_config: MakeConfig, tmp_path: Path) -> None:
    config = make_config(partitions=1)
    send_numbers(config, 2)
    log = tmp_path / "jobs.log"
    with kmq_worker(config, tmp_path, log, "--shutdown-grace-ms", "60000", job_s=60) as process:
        wait_for(lambda: lines(log, "start"), 30, what="a handler to start")
        process.send_signal(signal.SIGTERM)
        wait_for(lambda: "finishing in-flight messages" in output(tmp_path), 10, what="the first signal handled")
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 128 + signal.SIGTERM
    assert lines(log, "done") == []


def test_a_handler_that_cannot_be_imported_is_one_line_of_error(make_config: MakeConfig, tmp_path: Path) -> None:
    config = make_config(partitions=1)
    done = subprocess.run(
        [sys.executable, "-m", "kmq", "worker", "no_such_module:handle"],
        cwd=tmp_path,
        env={**os.environ, **config.to_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "cannot import module 'no_such_module'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
