"""What the demo shows: live progress while it runs, the verified summary, and curl lines for the REST facade."""

from __future__ import annotations

import json
import shlex
import time
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from kmq.config import KmqConfig
from kmq.demo.tally import Tally, Verdict

PLAIN_EVERY_S = 2.0


def counters(sent: int, tally: Tally) -> Text:
    """sent · processed · in flight · redelivered · dead-lettered."""
    parts = [
        ("sent", sent),
        ("processed", len(tally.processed)),
        ("in flight", tally.in_flight),
        ("redelivered", tally.redelivered),
        ("dead-lettered", len(tally.dead)),
    ]
    text = Text()
    for index, (label, value) in enumerate(parts):
        text.append(" · " if index else "", style="dim")
        text.append(f"{label} ", style="dim")
        text.append(f"{value:,}", style="bold")
    return text


class LiveProgress:
    """A progress bar of messages accounted for (processed or dead-lettered) and the counters under it.

    On a terminal it redraws in place; elsewhere (CI logs, pipes) it prints a plain line every few seconds.
    """

    def __init__(self, console: Console, expected: int) -> None:
        self._console = console
        self._progress = Progress(
            TextColumn("accounted for"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        )
        self._task: TaskID = self._progress.add_task("accounted", total=expected)
        self._status = Text()
        self._owners = Text()
        self._live = Live(self._renderable(), console=console, refresh_per_second=8, transient=False)
        self._next_plain = 0.0

    def update(self, sent: int, tally: Tally, owners: str) -> None:
        self._progress.update(self._task, completed=tally.accounted)
        self._status = counters(sent, tally)
        if owners != self._owners.plain and not self._console.is_terminal:
            self._console.print(owners, style="dim")
        self._owners = Text(owners, style="dim")
        self._live.update(self._renderable())
        if not self._console.is_terminal and time.monotonic() >= self._next_plain:
            self._next_plain = time.monotonic() + PLAIN_EVERY_S
            self._console.print(self._status)

    def __enter__(self) -> LiveProgress:
        if self._console.is_terminal:
            self._live.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._console.is_terminal:
            self._live.stop()
        else:
            self._console.print(self._status)

    def _renderable(self) -> Group:
        return Group(self._owners, self._progress, self._status)


def summary(verdict: Verdict, elapsed_s: float) -> Table:
    """The verified figures, read back from the topics."""
    table = Table(title="verified from the topics", show_header=False, title_justify="left", box=None, padding=(0, 2))
    table.add_column(style="dim")
    table.add_column(justify="right", style="bold")
    reasons = ", ".join(f"{count} {reason}" for reason, count in verdict.dead_reasons)
    rows: list[tuple[str, str | Text]] = [
        ("sent", f"{verdict.sent:,}"),
        ("processed", f"{verdict.processed:,}"),
        ("duplicates", f"{verdict.duplicates:,}"),
        ("redelivered", f"{verdict.redelivered:,}"),
        ("dead-lettered", f"{verdict.dead_lettered:,}" + (f" ({reasons})" if reasons else "")),
        ("lost", Text(f"{verdict.lost:,}", style="green" if verdict.lost == 0 else "bold red")),
        ("elapsed", f"{elapsed_s:.1f} s"),
        ("throughput", f"{verdict.sent / elapsed_s:,.0f} msg/s" if elapsed_s > 0 else "-"),
    ]
    for label, value in rows:
        table.add_row(label, value)
    return table


def conclusion(verdict: Verdict) -> Text:
    if verdict.ok:
        return Text.assemble(("OK", "bold green"), ": every message sent was processed at least once or dead-lettered")
    detail = f"{verdict.lost} of {verdict.expected} messages neither processed nor dead-lettered"
    sample = ", ".join(str(n) for n in verdict.lost_sample)
    missing = verdict.expected - verdict.sent
    extra = f"; {missing} never reached the queue topic" if missing else ""
    return Text.assemble(("LOST", "bold red"), f": {detail} (e.g. {sample}){extra}")


def exports(config: KmqConfig, api_url: str, api_key: str) -> str:
    """One `export` line so the examples (and `kmq` commands) in another terminal use this broker, queue and API."""
    names = {
        "KMQ_BOOTSTRAP_SERVERS": config.bootstrap_servers,
        "KMQ_QUEUE_TOPIC": config.queue_topic,
        "KMQ_API_URL": api_url,
        "KMQ_API_KEY": api_key,
    }
    if config.kafka_config:
        names["KMQ_KAFKA_CONFIG"] = json.dumps(config.kafka_config)
    if config.consumer_kafka_config:
        names["KMQ_CONSUMER_KAFKA_CONFIG"] = json.dumps(config.consumer_kafka_config)
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in names.items())


def curl_lines(api_url: str, api_key: str, queue: str) -> list[str]:
    """Ready-to-paste commands against the REST facade: send, receive, acknowledge, describe."""
    base = f"{api_url}/v1/queues/{queue}"
    auth = f'-H "Authorization: Bearer {api_key}"'
    json_post = f"curl -s {auth} -H 'Content-Type: application/json'"
    return [
        f"""{json_post} {base}/messages -d '{{"messages": [{{"value": "hello from curl"}}]}}'""",
        f"""{json_post} {base}/receive -d '{{"max_messages": 1, "wait_ms": 5000}}'""",
        f"""{json_post} {base}/ack -d '{{"receipts": ["<receipt from receive>"]}}'""",
        f"curl -s {auth} {base}",
        f"curl -s {api_url}/metrics | grep ^kmq_",
    ]
