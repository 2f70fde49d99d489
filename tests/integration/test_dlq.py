"""Dead letters on a real broker: a worker's rejects listed, shown and redriven — by `kmq.dlq`, `kmq dlq` and the
REST facade — each redriven dead letter processed once more, none twice."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from kmq import headers as h
from kmq.cli._app import _register_all, app
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.dlq import DeadLetterFilter, read_dead_letters, redrive
from kmq.dlq.records import REDRIVEN_FROM
from kmq.message import Message
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.worker import Reject, Worker
from tests.helpers import read_topic, wait_for
from tests.integration.test_api_endpoints import AUTH, api_config

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]


def send(config: KmqConfig, count: int) -> None:
    with KmqProducer(config) as producer:
        producer.send_batch(
            OutgoingMessage(f"m{i}".encode(), f"k{i}".encode(), [("trace", f"t{i}".encode())]) for i in range(count)
        )


class RejectFirstTime:
    """Rejects every message on its first delivery (reason `even` or `odd` by its number); processes redriven ones."""

    def __init__(self) -> None:
        self.processed: Counter[bytes] = Counter()
        self.copies: list[Message] = []
        self.lock = threading.Lock()

    def __call__(self, msg: Message) -> None:
        assert msg.value is not None
        if h.get(msg.headers, REDRIVEN_FROM) is None:
            raise Reject("even" if int(msg.value[1:]) % 2 == 0 else "odd")
        with self.lock:
            self.processed[msg.value] += 1
            self.copies.append(msg)


@pytest.fixture
def worker(make_config: MakeConfig) -> Iterator[tuple[KmqConfig, RejectFirstTime]]:
    config = make_config(partitions=2)
    handler = RejectFirstTime()
    runtime = Worker(handler, config, concurrency=4)
    thread = runtime.run_in_thread()
    try:
        yield config, handler
    finally:
        runtime.stop()
        thread.join(30)


def test_redrive_half_by_filter_then_all_processes_each_once_more_and_none_twice(
    worker: tuple[KmqConfig, RejectFirstTime],
) -> None:
    config, handler = worker
    # given 100 messages, every one dead-lettered by the worker's Reject
    send(config, 100)
    wait_for(lambda: len(read_dead_letters(config)) == 100, 60, interval_s=0.5, what="100 dead letters")
    dead = read_dead_letters(config)
    assert Counter(d.reason for d in dead) == {"rejected: even": 50, "rejected: odd": 50}
    assert {d.origin_topic for d in dead} == {config.queue_topic}
    assert all(d.delivery_count == 0 and not d.redriven for d in dead)
    # when the 50 even ones are redriven, twice
    first = redrive(config, DeadLetterFilter(reason="even"))
    again = redrive(config, DeadLetterFilter(reason="even"))
    # then 50 copies went back, the second run sent nothing, and the worker processed each once
    assert (first.redriven, first.already, again.redriven, again.already) == (50, 0, 0, 50)
    wait_for(lambda: len(handler.processed) == 50, 30, what="50 redriven messages processed")
    # when everything is redriven
    everything = redrive(config, DeadLetterFilter())
    assert (everything.redriven, everything.already) == (50, 50)
    wait_for(lambda: len(handler.processed) == 100, 30, what="100 redriven messages processed")
    # then each of the 100 was processed exactly once more, with its key, headers and a fresh count
    assert handler.processed == {f"m{i}".encode(): 1 for i in range(100)}
    for copy in handler.copies:
        assert copy.redelivery_count == 0
        number = copy.value[1:].decode() if copy.value else ""
        assert copy.key == f"k{number}".encode()
        assert h.get(copy.headers, "trace") == f"t{number}".encode()
    assert len(read_topic(config, config.queue_topic, 2)) == 200
    assert all(d.redriven for d in read_dead_letters(config))


def dead_lettered(config: KmqConfig, count: int) -> list[Message]:
    send(config, count)
    with KmqClient(config) as client:
        received: list[Message] = []
        wait_for(lambda: received.extend(client.receive(count, 0.2)) or len(received) >= count, 30)
        for msg in received:
            client.reject(msg, "bad input" if msg.partition == 0 else "timeout upstream")
    return received


def test_kmq_dlq_list_show_and_redrive_on_the_command_line(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(partitions=2)
    for name, value in config.to_env().items():
        monkeypatch.setenv(name, value)
    rejected = dead_lettered(config, 6)
    _register_all()
    runner = CliRunner()
    listed = runner.invoke(app, ["dlq", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert len(rows) == 6
    assert {(r["origin_partition"], r["origin_offset"]) for r in rows} == {(m.partition, m.offset) for m in rejected}
    assert {r["reason"] for r in rows} <= {"rejected: bad input", "rejected: timeout upstream"}
    assert all(r["delivery_count"] == 0 and r["first_failure"] for r in rows)
    table = runner.invoke(app, ["dlq", "list", "--reason", "bad input"])
    assert table.exit_code == 0 and "dead letters" in table.stdout
    one = rows[0]
    shown = runner.invoke(app, ["dlq", "show", str(one["partition"]), str(one["offset"])])
    assert shown.exit_code == 0, shown.output
    origin = next(m for m in rejected if (m.partition, m.offset) == (one["origin_partition"], one["origin_offset"]))
    detail = json.loads(shown.stdout)
    assert (detail["key"], detail["value"]) == (origin.key.decode(), origin.value.decode())  # type: ignore[union-attr]
    assert detail["headers"] == {"trace": h.get(origin.headers, "trace").decode()}  # type: ignore[union-attr]
    missing = runner.invoke(app, ["dlq", "show", "0", "999"])
    assert missing.exit_code == 1 and "no dead letter" in missing.output
    unfiltered = runner.invoke(app, ["dlq", "redrive"])
    assert unfiltered.exit_code == 1 and "--all" in unfiltered.output
    done = runner.invoke(app, ["dlq", "redrive", "--all"])
    assert done.exit_code == 0 and "redrove 6 dead letters" in done.output, done.output
    twice = runner.invoke(app, ["dlq", "redrive", "--all"])
    assert (
        twice.exit_code == 0 and "redrove 0 dead letters" in twice.output and "6 were redriven before" in twice.output
    )
    pending = runner.invoke(app, ["dlq", "list", "--json", "--pending"])
    assert pending.stdout.strip() == ""


def test_dead_letter_endpoints_behind_the_api_key(make_config: MakeConfig) -> None:
    config = make_config(partitions=2)
    rejected = dead_lettered(config, 4)
    base = f"/v1/queues/{config.queue_topic}/dead-letters"
    with TestClient(_app(config)) as http:
        assert http.get(base).status_code == 401
        assert http.post(f"{base}/redrive", json={"all": True}).status_code == 401
        listed = http.get(base, headers=AUTH, params={"encoding": "base64"})
        assert listed.status_code == 200, listed.text
        letters = listed.json()["dead_letters"]
        assert len(letters) == 4 and all(d["encoding"] == "base64" for d in letters)
        first = letters[0]
        shown = http.get(f"{base}/{first['partition']}/{first['offset']}", headers=AUTH)
        assert shown.status_code == 200 and shown.json()["reason"] == first["reason"]
        assert http.get(f"{base}/0/12345", headers=AUTH).status_code == 404
        nothing = http.post(f"{base}/redrive", headers=AUTH, json={})  # no filter, no all: nothing selected
        assert nothing.json() == {"redriven": 0, "already_redriven": 0, "foreign": 0}
        assert http.post(f"{base}/redrive", headers=AUTH, json={"all": 1}).status_code == 422
        by_reason = http.post(f"{base}/redrive", headers=AUTH, json={"reason": "bad input"})
        expected = sum(1 for m in rejected if m.partition == 0)
        assert by_reason.json() == {"redriven": expected, "already_redriven": 0, "foreign": 0}
        rest = http.post(f"{base}/redrive", headers=AUTH, json={"all": True}).json()
        assert rest == {"redriven": 4 - expected, "already_redriven": expected, "foreign": 0}
        assert http.get(base, headers=AUTH, params={"pending": True}).json() == {"dead_letters": []}


def _app(config: KmqConfig) -> Any:
    from kmq_api.app import create_app

    return create_app(api_config(config))


def test_a_listing_never_waits_out_the_users_long_fetch_wait(make_config: MakeConfig) -> None:
    # given consumers that long-poll (a fetch parked at a partition's end waits up to 30 s for data)
    config = make_config(partitions=2, consumer_kafka_config={"fetch.wait.max.ms": 30_000})
    # when the dead letters (none: every partition is at its end at once) are listed within 5 s
    # then the listing reaches the end of both partitions instead of waiting for the parked fetches
    assert read_dead_letters(config, timeout_s=5) == []


def test_once_admin_keys_are_set_only_they_may_redrive_through_the_api(make_config: MakeConfig) -> None:
    config = make_config(partitions=1)
    dead_lettered(config, 2)
    base = f"/v1/queues/{config.queue_topic}/dead-letters"
    admin = {"Authorization": "Bearer the-admin-key"}
    from kmq_api.app import create_app

    with TestClient(create_app(api_config(config, admin_keys=(SecretStr("the-admin-key"),)))) as http:
        assert http.get(base, headers=AUTH).status_code == 200  # a read-only key reads
        refused = http.post(f"{base}/redrive", headers=AUTH, json={"all": True})
        assert refused.status_code == 403, refused.text
        assert http.get(base, headers=admin, params={"pending": True}).json()["dead_letters"] != []
        done = http.post(f"{base}/redrive", headers=admin, json={"all": True})
        assert done.json() == {"redriven": 2, "already_redriven": 0, "foreign": 0}
