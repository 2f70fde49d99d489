"""`python -m kmq.demo.worker`: one demo worker process.

It processes queue messages, leaves `--drop-rate` of them unacknowledged (the tracker redelivers them), rejects poison
messages to the dead-letter topic, and records each message it processed on the results topic before acknowledging
it. It stops when its stdin closes (the demo closes it; it also closes when the demo dies).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import threading
from collections.abc import Sequence

from confluent_kafka import Producer

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.delivery import DeliveryGroup
from kmq.demo.numbers import decode_number, is_poison
from kmq.errors import CommitError, DeliveryError, MarkerWriteError
from kmq.kafka import produce, producer_settings
from kmq.message import Message

_log = logging.getLogger("kmq.demo.worker")
BATCH_SIZE = 200
RESULTS_TIMEOUT_S = 30.0


class DemoWorker:
    """Handles one batch at a time: results durable first, then the END markers."""

    def __init__(self, client: KmqClient, results: Producer, results_topic: str, args: argparse.Namespace) -> None:
        self._client, self._results, self._results_topic = client, results, results_topic
        self._drop_rate, self._poison_every = args.drop_rate, args.poison_every
        self._chance = random.Random(args.seed)

    def handle(self, batch: Sequence[Message]) -> None:
        done = [msg for msg in batch if self._keep(msg)]
        group = DeliveryGroup()
        for index, msg in enumerate(done):
            produce(self._results, self._results_topic, msg.value, on_delivery=group.callback(index))
        try:
            group.wait(self._results, RESULTS_TIMEOUT_S)
        except DeliveryError as e:
            # Not acknowledged: the tracker redelivers them, so nothing is lost.
            _log.warning("recording %d results failed (%s); leaving them to redelivery", len(done), e)
            return
        for msg in done:
            self._client.processed(msg)

    def _keep(self, msg: Message) -> bool:
        """True when the message is processed now; poison is rejected and a few are dropped."""
        number = decode_number(msg.value)
        if number is not None and is_poison(number, self._poison_every):
            self._reject(msg, number)
            return False
        if self._chance.random() < self._drop_rate:
            return False  # "crashed" while processing: no END, the tracker redelivers it after the timeout
        return number is not None or self._ack_foreign(msg)

    def _reject(self, msg: Message, number: int) -> None:
        try:
            self._client.reject(msg, "poison message")
        except DeliveryError as e:
            _log.warning("dead-lettering %d failed (%s); the tracker will redeliver it", number, e)

    def _ack_foreign(self, msg: Message) -> bool:
        _log.info("acknowledging a message that is not a demo number: %r", msg.value)
        self._client.processed(msg)
        return False


def run(args: argparse.Namespace, stop: threading.Event) -> None:
    config = KmqConfig.from_env()
    results = Producer(producer_settings(config))
    with KmqClient(config) as client:
        worker = DemoWorker(client, results, args.results_topic, args)
        while not stop.is_set():
            worker.handle(_receive(client))
    results.flush(RESULTS_TIMEOUT_S)


def _receive(client: KmqClient) -> list[Message]:
    try:
        return client.receive(max_messages=BATCH_SIZE, timeout_s=0.2)
    except (CommitError, MarkerWriteError) as e:
        # A rebalance, or a broker hiccup: the batch is read again (or redelivered), nothing is lost.
        _log.warning("receive failed, trying again: %s", e)
        return []


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kmq.demo.worker", description=__doc__)
    parser.add_argument("--results-topic", required=True)
    parser.add_argument("--drop-rate", type=float, default=0.1)
    parser.add_argument("--poison-every", type=int, default=997)
    parser.add_argument("--seed", type=int, default=None)
    return parser.parse_args(argv)


def _stop_on_stdin_eof(stop: threading.Event) -> None:
    # os.read, not sys.stdin: a daemon thread blocked in a buffered reader would break the interpreter's shutdown.
    while os.read(0, 1024):
        continue
    stop.set()


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = _parse(sys.argv[1:] if argv is None else argv)
    stop = threading.Event()
    threading.Thread(target=_stop_on_stdin_eof, args=(stop,), name="stdin-watch", daemon=True).start()
    run(args, stop)


if __name__ == "__main__":
    main()
