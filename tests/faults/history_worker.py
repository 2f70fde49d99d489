"""`python -m tests.faults.history_worker --history FILE --name NAME`: a worker process that records its history.

A KmqClient (configured from `KMQ_*`) receives batches; each message's hand-out and handler run are recorded, then
the batch is acknowledged and the client flushed: the acks are recorded as confirmed when the flush counted no
failed marker (every END written is acknowledged by the broker, acks=all). Messages are the demo's numbers. It
stops when its stdin closes; an error it does not expect ends it loudly (exit code 1), which the test sees.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.demo.numbers import decode_number
from kmq.errors import CommitError, KafkaUnavailableError, MarkerWriteError
from kmq.message import Message
from tests.faults.history import Recorder

_log = logging.getLogger("tests.faults.history_worker")
BATCH_SIZE = 100
FLUSH_TIMEOUT_S = 60.0


def handle(client: KmqClient, batch: Sequence[Message], history: Recorder, acks_only: bool = False) -> None:
    numbered = [(msg, n) for msg in batch if (n := decode_number(msg.value)) is not None]
    for msg, n in numbered if not acks_only else ():
        history.record("handout", n, partition=msg.partition, offset=msg.offset, deadline=msg.deadline_ms / 1000)
        history.record("run", n)  # the handler: nothing to do but be counted
    failed_before = client.failed_markers
    client.processed_many(batch)
    client.flush(FLUSH_TIMEOUT_S)
    if client.failed_markers != failed_before:
        _log.warning("%d END markers failed: those messages come back", client.failed_markers - failed_before)
        return
    # One write, at once: a SIGKILL between the flush (the ENDs durable) and this write leaves acks that no record
    # shows (a checker that knows only the records counts those messages lost), so that window is kept short.
    history.record_all("ack", [(n, {"deadline": msg.deadline_ms / 1000}) for msg, n in numbered])


def run(history: Recorder, stop: threading.Event, acks_only: bool = False) -> None:
    with KmqClient(KmqConfig.from_env()) as client:
        while not stop.is_set():
            try:
                batch = client.receive(max_messages=BATCH_SIZE, timeout_s=0.2)
            except (CommitError, MarkerWriteError, KafkaUnavailableError) as e:
                # The network is faulty: the batch is read again or redelivered; nothing is lost.
                _log.warning("receive failed, trying again: %s", e)
                continue
            if batch:
                handle(client, batch, history, acks_only)


def _stop_on_stdin_eof(stop: threading.Event) -> None:
    while os.read(0, 1024):
        continue
    stop.set()


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="python -m tests.faults.history_worker", description=__doc__)
    parser.add_argument("--history", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--acks-only", action="store_true", help="record the confirmed acks only (the soak)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    stop = threading.Event()
    threading.Thread(target=_stop_on_stdin_eof, args=(stop,), name="stdin-watch", daemon=True).start()
    history = Recorder(args.history, args.name)
    try:
        run(history, stop, args.acks_only)
    finally:
        history.close()


if __name__ == "__main__":
    main()
