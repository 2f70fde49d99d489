"""`python -m kmq.bench.worker CONTENDER`: one measured run of a consumer contender, in a process of its own.

Its memory is then its own, and no run inherits another's threads or heap. The queue comes from `KMQ_*` variables.
The line protocol with the parent is in `kmq.bench.protocol`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from kmq.bench.kmq_client import KmqContender
from kmq.bench.measure import BatchClock
from kmq.bench.options import KMQ, KMQ_BATCH, PLAIN, PLAIN_ASYNC, SHARE, WORKER, WORKER_KEY
from kmq.bench.plain import PlainContender
from kmq.bench.protocol import ERROR, GO, PROGRESS, READY, RESULT
from kmq.bench.share import ShareContender
from kmq.bench.worker_contender import WorkerContender
from kmq.config import KmqConfig
from kmq.errors import BenchError
from kmq.worker import Ordering

_log = logging.getLogger(__name__)
PROFILE_INTERVAL_S = 0.001


class Contender(Protocol):
    def prepare(self, deadline: float) -> None: ...

    def run(self, clock: BatchClock, progress: Any, stall_s: float) -> dict[str, Any]: ...

    def close(self) -> None: ...


def make_contender(
    name: str, config: KmqConfig, batch: int, partitions: int, work_us: int = 0, messages: int = 0
) -> Contender:
    if name in (PLAIN, PLAIN_ASYNC):
        return PlainContender(config, batch, asynchronous=name == PLAIN_ASYNC, work_us=work_us)
    if name in (KMQ, KMQ_BATCH):  # the marker format comes with the config (KMQ_MARKER_FORMAT)
        return KmqContender(config, batch, work_us)
    if name == SHARE:
        return ShareContender(config, batch, partitions, work_us)
    if name in (WORKER, WORKER_KEY):
        ordering = Ordering.KEY if name == WORKER_KEY else Ordering.NONE
        return WorkerContender(config, batch, ordering, work_us, messages)
    raise BenchError(f"no worker for contender {name!r}")


def measure(contender: Contender, args: argparse.Namespace) -> dict[str, Any]:
    contender.prepare(time.monotonic() + args.prepare_timeout_ms / 1000)
    _say(READY)
    if sys.stdin.readline().strip() != GO:
        raise BenchError("the parent went away before the queue was loaded")
    clock = BatchClock(args.messages)
    clock.start()
    with _profiled(args.profile):
        return contender.run(clock, lambda done: _say(f"{PROGRESS} {done}"), args.stall_timeout_ms / 1000)


@contextlib.contextmanager
def _profiled(path: str | None) -> Iterator[None]:
    """pyinstrument over the measured window, its text report written to `path` (`kmq bench --profile`)."""
    if path is None:
        yield
        return
    from pyinstrument import Profiler  # optional, like matplotlib: pip install 'kmq[bench]'

    profiler = Profiler(interval=PROFILE_INTERVAL_S)
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()
        Path(path).write_text(profiler.output_text(unicode=True, color=False), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = _parser().parse_args(argv)
    try:
        config = KmqConfig.from_env()
        contender = make_contender(args.contender, config, args.batch, args.partitions, args.work_us, args.messages)
        try:
            figures = measure(contender, args)
        finally:
            contender.close()
    except Exception as e:  # noqa: BLE001  # reported to the parent in one line; the traceback goes to stderr
        _log.exception("%s worker failed", args.contender)
        _say(f"{ERROR} {type(e).__name__}: {e}")
        return 1
    _say(f"{RESULT} {json.dumps(figures)}")
    return 0


def _say(line: str) -> None:
    sys.stdout.write(line.replace("\n", " ") + "\n")
    sys.stdout.flush()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kmq.bench.worker", description=__doc__)
    parser.add_argument("contender", choices=(PLAIN, PLAIN_ASYNC, KMQ, KMQ_BATCH, SHARE, WORKER, WORKER_KEY))
    parser.add_argument("--messages", type=int, required=True, help="messages the parent preloads")
    parser.add_argument("--batch", type=int, required=True, help="messages per receive")
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--prepare-timeout-ms", type=int, default=60_000)
    parser.add_argument("--stall-timeout-ms", type=int, default=60_000)
    parser.add_argument("--work-us", type=int, default=0, help="CPU each handler burns per message, µs")
    parser.add_argument("--profile", help="write a pyinstrument profile of the measured window to this file")
    return parser


if __name__ == "__main__":
    sys.exit(main())
