"""`run_demo`: the whole demo, step by step, with every child process stopped on the way out (also on Ctrl-C)."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from kmq.config import KmqConfig
from kmq.demo import display, http_client
from kmq.demo.cluster import create_topics, describe, open_cluster, queue_config
from kmq.demo.observer import TopicObserver
from kmq.demo.options import DemoOptions, fresh_queue_name, results_topic
from kmq.demo.processes import Children
from kmq.demo.sending import Sender
from kmq.demo.services import Api, Service, owned_partitions, start_api, start_trackers, wait_ready
from kmq.demo.tally import Tally, Verdict
from kmq.demo.workers import start_workers
from kmq.embedded import KafkaCluster
from kmq.errors import DemoError

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
VERIFY_TIMEOUT_S = 60.0
OWNERS_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the run verified, and how long its parts took."""

    verdict: Verdict
    startup_s: float
    elapsed_s: float
    total_s: float


def run_demo(options: DemoOptions, console: Console) -> Outcome:
    """Steps 1-7 of the demo; raises KeyboardInterrupt on Ctrl-C after stopping everything it started."""
    started = time.monotonic()
    log_dir = Path(tempfile.mkdtemp(prefix="kmq-demo-"))
    children = Children(log_dir)
    keep_logs = True  # for an error or a loss; not for a success or a Ctrl-C
    try:
        with open_cluster(options.bootstrap_servers, options.backend) as cluster:
            try:
                outcome = _run(options, console, cluster, children, started)
            finally:
                _stop_all(console, children)
    except KeyboardInterrupt:
        keep_logs = False
        raise
    else:
        keep_logs = not outcome.verdict.ok
    finally:
        _keep_or_remove_logs(console, log_dir, keep_logs)
    return outcome


def _run(options: DemoOptions, console: Console, cluster: KafkaCluster, children: Children, started: float) -> Outcome:
    queue = options.queue or fresh_queue_name()
    config = queue_config(
        cluster,
        queue,
        msg_timeout_ms=options.msg_timeout_ms,
        max_redeliveries=options.max_redeliveries,
        marker_format=options.marker_format,
    )
    results = results_topic(queue)
    # 1. The broker is up: create the queue, markers, dead-letter and results topics.
    create_topics(cluster, config, options.partitions, results)
    console.print(
        f"[bold]kmq demo[/] · queue [cyan]{queue}[/] ({options.partitions} partitions) on {describe(cluster)}"
    )
    # 2. The tracker replicas and the REST facade.
    trackers, api = _start_services(options, config, children)
    startup_s = time.monotonic() - started
    console.print(_started_line(options, trackers, api, startup_s))
    # 3 + 4. Send the numbered messages while the workers process them.
    workers = start_workers(children, config, options, results)
    run_started = time.monotonic()
    sender = Sender(config, options.messages).start()
    # 5. Live progress, until every message is accounted for (or the deadline passes).
    _watch(options, console, config, results, sender, children, trackers)
    elapsed_s = time.monotonic() - run_started
    children.stop(workers, STOP_TIMEOUT_S)
    # 6. Verify from the topics, read again from the beginning: not from the counters.
    tally = _verify(config, results)
    verdict = tally.verdict(options.messages)
    console.print(display.summary(verdict, elapsed_s))
    console.print(display.conclusion(verdict))
    if options.keep_running and api is not None:
        _keep_running(console, children, api, config, tally)
    return Outcome(verdict, startup_s, elapsed_s, time.monotonic() - started)


def _start_services(options: DemoOptions, config: KmqConfig, children: Children) -> tuple[list[Service], Api | None]:
    trackers = start_trackers(children, config, options.trackers)
    api = None
    if options.api:
        # The facade's receivers get a group of their own. The workers' group is no good after the run: on tansu a
        # group whose members all leave at once (the workers stopping) assigns nothing to the next member.
        http_config = config.with_overrides(group_id=f"{config.queue_topic}__http")
        api = start_api(children, http_config, options.api_port, [tracker.url for tracker in trackers])
    wait_ready(children, trackers + ([api.service] if api else []), "/readyz", READY_TIMEOUT_S)
    return trackers, api


def _watch(
    options: DemoOptions,
    console: Console,
    config: KmqConfig,
    results: str,
    sender: Sender,
    children: Children,
    trackers: list[Service],
) -> None:
    deadline = time.monotonic() + options.deadline_ms / 1000
    observer = TopicObserver(config, results)
    owners, owners_at = "", 0.0
    try:
        with display.LiveProgress(console, options.messages) as live:
            while not observer.tally.all_accounted(options.messages):
                if time.monotonic() > deadline:
                    console.print(f"[red]not every message was accounted for within {options.deadline_ms} ms[/]")
                    return
                observer.poll(0.1)
                _check(sender, children)
                if time.monotonic() >= owners_at:
                    owners, owners_at = _owners(trackers), time.monotonic() + OWNERS_EVERY_S
                live.update(sender.sent, observer.tally, owners)
            live.update(sender.sent, observer.tally, owners)
    finally:
        observer.close()


def _check(sender: Sender, children: Children) -> None:
    if sender.failure is not None:
        raise DemoError(f"sending failed after {sender.sent} messages: {sender.failure}") from sender.failure
    children.check()


def _owners(trackers: list[Service]) -> str:
    """Which markers partitions (and so queue partitions) each tracker replica owns right now."""
    parts = [f"{t.child.name}: partitions {_ranges(owned_partitions(t)) or '-'}" for t in trackers]
    return " · ".join(parts)


def _ranges(numbers: list[int]) -> str:
    spans: list[list[int]] = []
    for n in numbers:
        if spans and spans[-1][1] == n - 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _verify(config: KmqConfig, results: str) -> Tally:
    observer = TopicObserver(config, results)
    try:
        return observer.read_to_end(VERIFY_TIMEOUT_S)
    finally:
        observer.close()


def _started_line(options: DemoOptions, trackers: list[Service], api: Api | None, startup_s: float) -> str:
    api_part = f", REST facade at {api.service.url}" if api else ""
    return (
        f"ready in {startup_s:.1f} s: {len(trackers)} tracker replicas{api_part}; now {options.workers} workers "
        f"process {options.messages:,} messages, leaving {options.drop_rate:.0%} unacknowledged "
        f"(redelivered after {options.msg_timeout_ms} ms)"
    )


def _keep_running(console: Console, children: Children, api: Api, config: KmqConfig, tally: Tally) -> None:
    queue = config.queue_topic
    queue_url = f"{api.service.url}/v1/queues/{queue}"
    records = len(tally.originals) + tally.redelivered + tally.foreign
    taken = http_client.drain(queue_url, api.api_key, records, READY_TIMEOUT_S)
    console.print(f"the REST facade's receivers took and acknowledged {taken:,} demo deliveries; try it:")
    for line in display.curl_lines(api.service.url, api.api_key, queue):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print("for the examples (examples/*/README.md) and `kmq` commands in another terminal:")
    console.print(display.exports(config, api.service.url, api.api_key), markup=False, highlight=False, soft_wrap=True)
    console_line = f"the console: {api.service.url}/console (log in with the API key {api.api_key})"
    console.print(console_line, markup=False, highlight=False, soft_wrap=True)
    console.print("broker, trackers and REST facade keep running: Ctrl-C stops them all")
    try:
        while True:
            children.check()
            time.sleep(1.0)  # nothing to wait for but Ctrl-C: a child that dies is reported within a second
    except KeyboardInterrupt:
        console.print("stopping")


def _stop_all(console: Console, children: Children) -> None:
    killed = children.stop_all(STOP_TIMEOUT_S)
    if killed:
        console.print(f"[yellow]had to kill {', '.join(child.name for child in killed)}[/]")


def _keep_or_remove_logs(console: Console, log_dir: Path, keep: bool) -> None:
    # Empty when the run failed before any child started (an unreachable cluster): nothing worth pointing at.
    if keep and any(log_dir.iterdir()):
        console.print(f"logs of the child processes: {log_dir}")
    else:
        shutil.rmtree(log_dir, ignore_errors=True)
