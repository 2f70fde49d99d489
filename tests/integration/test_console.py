"""The operator's console in a real browser (Debian's chromium through Selenium) against the embedded Apache Kafka:
log in, overview and backlog, peek that changes nothing, hostile payloads as text, a redrive from the page that a
worker then processes, read-only keys refused, cross-site forms refused. Each page is saved as a screenshot."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from pydantic import SecretStr
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from kmq import headers as h
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.dlq import read_dead_letters
from kmq.dlq.records import REDRIVEN_FROM
from kmq.message import Message
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.worker import Reject, Worker
from kmq_api.config import ApiConfig
from tests.helpers import committed_offsets, read_topic, wait_for
from tests.integration.console_browser import http_log_in, log_in, screenshot, serve, start_browser, text
from tests.integration.test_tracker_e2e import running_tracker

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]
READ_KEY = "console-read-only-key"
ADMIN_KEY = "console-admin-key"
SECRET = "console-test-secret-0123456789abcdef"
HOSTILE = (
    "<img src=x onerror=\"document.body.dataset.pwned='img'\"><script>document.body.dataset.pwned='script'</script>"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver = start_browser()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-screenshots")


def facade(*queues: KmqConfig) -> ApiConfig:
    return ApiConfig(
        queues=queues, receipt_secret=SECRET, api_keys=(SecretStr(READ_KEY),), admin_keys=(SecretStr(ADMIN_KEY),)
    )


def send(config: KmqConfig, *messages: OutgoingMessage) -> None:
    with KmqProducer(config) as producer:
        producer.send_batch(messages)


def end_offsets(config: KmqConfig, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({**config.kafka_settings(), "group.id": "console-test-watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()


def session_client(browser: webdriver.Chrome, base: str) -> httpx.Client:
    """An HTTP client holding the browser's session cookie (to send what the page would not)."""
    cookie = browser.get_cookie("kmq_console")
    assert cookie is not None, "no session cookie after logging in"
    return httpx.Client(base_url=base, cookies={"kmq_console": cookie["value"]}, timeout=30)


def test_login_then_overview_shows_the_queue_and_its_backlog(
    make_config: MakeConfig, browser: webdriver.Chrome, shots: Path
) -> None:
    config = make_config(partitions=2)
    with serve(facade(config)) as base:
        browser.get(f"{base}/console")
        assert browser.current_url.endswith("/console/login"), "an anonymous visitor must be sent to the login form"
        browser.find_element(By.ID, "key").send_keys("not-a-key")
        browser.find_element(By.ID, "login").click()
        wait_for(lambda: "Unknown API key" in text(browser, "#login-error"), timeout_s=30, what="the login's refusal")
        screenshot(browser, shots, "login")
        log_in(browser, base, READ_KEY)
        cookie = browser.get_cookie("kmq_console")
        assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict" and "expiry" in cookie
        assert config.queue_topic in text(browser, "section.queue h2")
        # (a broker just started may not answer for the group's offsets at once: the page shows why, then refreshes)
        wait_for(lambda: text(browser, ".backlog") == "0", timeout_s=30, what="the overview to show a backlog of 0")
        # when messages are sent, the page (without a reload) shows them as the backlog
        send(config, *(OutgoingMessage(f"job-{i}".encode(), f"k{i}".encode()) for i in range(7)))
        wait_for(lambda: text(browser, ".backlog") == "7", timeout_s=30, what="the overview to show a backlog of 7")
        # without tracker replicas configured, their figures are unknown, never a made-up 0
        assert text(browser, ".rate-acknowledged") == text(browser, ".rate-redelivered") == "unknown"
        screenshot(browser, shots, "overview-backlog")


def test_the_overview_shows_tracker_replicas_their_partitions_health_and_the_messages_in_flight(
    make_config: MakeConfig, browser: webdriver.Chrome, shots: Path
) -> None:
    config = make_config(partitions=2)
    send(config, *(OutgoingMessage(f"job-{i}".encode(), f"k{i}".encode()) for i in range(5)))
    with running_tracker(config) as tracker, KmqClient(config) as client:
        received: list[Message] = []
        wait_for(lambda: received.extend(client.receive(10, 0.5, 120_000)) or len(received) == 5, 30, what="5")
        client.wait_started()
        replicas = (f"http://127.0.0.1:{tracker.http_port}", "http://127.0.0.1:1")
        with serve(facade(config).model_copy(update={"tracker_urls": replicas}), history_interval_s=2.0) as base:
            log_in(browser, base, READ_KEY)
            wait_for(lambda: text(browser, ".in-flight") == "5", timeout_s=30, what="5 messages in flight")
            rows = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "tr.tracker")]
            assert len(rows) == 2 and rows[0].endswith("healthy 0, 1"), rows
            assert "unhealthy: unreachable" in rows[1], rows
            # two samples make the rates and the backlog's chart
            wait_for(lambda: text(browser, ".rate-received") == "0", timeout_s=60, what="the rates per minute")
            wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, 'svg[data-series="backlog"] polyline'), 30)
            # the tracker's counters: the first scrape sets the baseline, two more make the rates
            wait_for(
                lambda: text(browser, ".rate-acknowledged") == "0" and text(browser, ".rate-redelivered") == "0",
                timeout_s=60,
                what="the acknowledged and redelivered rates",
            )
            # 3 messages are acknowledged and 2 nacked (the tracker redelivers them at once)
            for message in received[:3]:
                client.processed(message)
            for message in received[3:]:
                client.nack(message, 0)
            client.flush()
            with session_client(browser, base) as http:
                wait_for(lambda: counted(http) == (3, 2), timeout_s=60, what="3 acknowledged and 2 redelivered")
            wait_for(
                lambda: (
                    float(text(browser, ".rate-acknowledged") or 0) > 0
                    and float(text(browser, ".rate-redelivered") or 0) > 0
                ),
                timeout_s=30,
                what="the page to show the rates",
            )
            wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, 'svg[data-series="acknowledged"] polyline'), 30)
            wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, 'svg[data-series="redelivered"] polyline'), 30)
            screenshot(browser, shots, "overview")


def counted(http: httpx.Client) -> tuple[int, int]:
    """The acknowledged and redelivered messages of the overview's history (first to last known sample)."""
    answer = http.get("/console/overview.json")
    assert answer.status_code == 200, answer.text
    samples = answer.json()["queues"][0]["samples"]
    known = [s for s in samples if s["acknowledged"] is not None and s["redelivered"] is not None]
    if not known:
        return (0, 0)
    return (
        known[-1]["acknowledged"] - known[0]["acknowledged"],
        known[-1]["redelivered"] - known[0]["redelivered"],
    )


def test_peek_shows_messages_and_changes_nothing(
    make_config: MakeConfig, browser: webdriver.Chrome, shots: Path
) -> None:
    config = make_config(partitions=1)
    send(
        config,
        OutgoingMessage(b'{"order": 42, "items": ["tea"]}', b"order-42", [("trace", b"abc123")]),
        OutgoingMessage(b"\x00\x01binary\xff", b"blob", None),
    )
    before = (committed_offsets(config, 1), end_offsets(config, config.markers_topic, 1))
    with serve(facade(config)) as base:
        log_in(browser, base, READ_KEY)
        browser.get(f"{base}/console/queues/{config.queue_topic}/peek?partition=0&offset=0&count=10")
        assert text(browser, "article.message .key").split("\n") == ["order-42", "blob"]
        assert "trace=abc123" in text(browser, "article.message .headers")
        assert '"order": 42' in browser.find_element(By.CSS_SELECTOR, ".value-json").get_attribute("textContent")
        hex_views = browser.find_elements(By.CSS_SELECTOR, ".value-hex")
        assert "00 01 62 69 6e 61 72 79 ff" in (hex_views[1].get_attribute("textContent") or "")
        screenshot(browser, shots, "peek")
        browser.get(f"{base}/console/queues/{config.queue_topic}/peek?partition=0")  # from the group's position
        assert len(browser.find_elements(By.CSS_SELECTOR, "article.message")) == 2
    after = (committed_offsets(config, 1), end_offsets(config, config.markers_topic, 1))
    assert after == before, "peeking must not commit an offset nor write a marker"
    assert before[1] == {0: 0}


def test_a_hostile_payload_renders_as_text_and_runs_nothing(
    make_config: MakeConfig, browser: webdriver.Chrome, shots: Path
) -> None:
    config = make_config(partitions=1)
    send(config, OutgoingMessage(HOSTILE.encode(), HOSTILE.encode(), [(HOSTILE, HOSTILE.encode())]))
    with serve(facade(config)) as base:
        log_in(browser, base, READ_KEY)
        browser.get(f"{base}/console/queues/{config.queue_topic}/peek?partition=0&offset=0")
        assert text(browser, ".value-text") == HOSTILE
        assert HOSTILE in text(browser, "article.message .key")
        assert not browser.find_elements(By.CSS_SELECTOR, "#messages img, #messages script")
        assert browser.execute_script("return document.body.dataset.pwned === undefined") is True
        screenshot(browser, shots, "hostile-payload")
        csp = httpx.get(f"{base}/console/login").headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp


class RejectFirstTime:
    """Rejects every message on its first delivery; processes the redriven copies."""

    def __init__(self) -> None:
        self.processed: list[bytes] = []
        self.lock = threading.Lock()

    def __call__(self, msg: Message) -> None:
        assert msg.value is not None
        if h.get(msg.headers, REDRIVEN_FROM) is None:
            raise Reject("not yet")
        with self.lock:
            self.processed.append(msg.value)


@pytest.fixture
def dead_lettered(make_config: MakeConfig) -> Iterator[tuple[KmqConfig, RejectFirstTime]]:
    """A queue whose worker dead-letters 3 messages (they are processed once redriven)."""
    config = make_config(partitions=1)
    handler = RejectFirstTime()
    runtime = Worker(handler, config, concurrency=2)
    thread = runtime.run_in_thread()
    try:
        send(
            config, *(OutgoingMessage(f"task-{i}".encode(), f"k{i}".encode(), [("tenant", b"acme")]) for i in range(3))
        )
        wait_for(lambda: len(read_dead_letters(config)) == 3, 60, interval_s=0.5, what="3 dead letters")
        yield config, handler
    finally:
        runtime.stop()
        thread.join(30)
        assert not thread.is_alive()


def test_a_dead_letter_redriven_from_the_page_is_processed_by_the_worker(
    dead_lettered: tuple[KmqConfig, RejectFirstTime], browser: webdriver.Chrome, shots: Path
) -> None:
    config, handler = dead_lettered
    with serve(facade(config)) as base:
        log_in(browser, base, ADMIN_KEY)
        browser.get(f"{base}/console/queues/{config.queue_topic}/dead-letters?key=k1")
        assert text(browser, "#matched").startswith("1 dead letters match")
        browser.get(f"{base}/console/queues/{config.queue_topic}/dead-letters")
        assert text(browser, "#matched").startswith("3 dead letters match")
        screenshot(browser, shots, "dead-letters")
        row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "tr.dead-letter") if "k1" in r.text)
        row.find_element(By.CSS_SELECTOR, "input[name=pick]").click()
        browser.find_element(By.ID, "redrive").click()
        wait_for(lambda: "done: 1 sent" in text(browser, ".job-state"), timeout_s=30, what="the job's progress")
        screenshot(browser, shots, "redrive-done")
        wait_for(lambda: handler.processed == [b"task-1"], timeout_s=60, what="the worker to process the copy")
        browser.get(f"{base}/console/queues/{config.queue_topic}/dead-letters")
        states = {
            r.find_element(By.CSS_SELECTOR, ".key").text: r.find_element(By.CSS_SELECTOR, ".state").text
            for r in browser.find_elements(By.CSS_SELECTOR, "tr.dead-letter")
        }
        assert states == {"k0": "pending", "k1": "redriven", "k2": "pending"}
        # the story of the original message: its START, its END (written by the reject) and its dead letter
        original = next(d for d in read_dead_letters(config) if d.key == b"k1")
        browser.get(
            f"{base}/console/queues/{config.queue_topic}/story?partition={original.origin_partition}"
            f"&offset={original.origin_offset}"
        )
        events = text(browser, "#events .what").split("\n")
        # (each record's own timestamp orders them: the client's, the broker's, the dead-letter producer's clocks)
        assert sorted(events) == ["END", "START", "dead letter"], events
        assert not browser.find_elements(By.ID, "cut-short")
        screenshot(browser, shots, "story")


def test_a_read_only_key_has_no_redrive_button_and_its_post_is_refused(
    dead_lettered: tuple[KmqConfig, RejectFirstTime], browser: webdriver.Chrome
) -> None:
    config, _ = dead_lettered
    with serve(facade(config)) as base:
        log_in(browser, base, READ_KEY)
        browser.get(f"{base}/console/queues/{config.queue_topic}/dead-letters")
        assert text(browser, "#matched").startswith("3 dead letters match")
        assert not browser.find_elements(By.ID, "redrive")
        assert not browser.find_elements(By.ID, "purge")
        with session_client(browser, base) as http:
            form: dict[str, Any] = {"everything": "true", "rate": "100", "csrf": "anything"}
            answer = http.post(f"/console/queues/{config.queue_topic}/dead-letters/redrive", data=form)
            assert answer.status_code == 403, answer.text
            answer = http.post(
                f"/console/queues/{config.queue_topic}/dead-letters/purge",
                data={"partition": 0, "offset": 3, "confirm": 3},
            )
            assert answer.status_code == 403, answer.text
    assert not any(dead.redriven for dead in read_dead_letters(config))
    assert end_offsets(config, config.dead_letter_topic, 1) == {0: 3}


def test_a_cross_site_form_without_the_csrf_token_is_refused(
    dead_lettered: tuple[KmqConfig, RejectFirstTime], browser: webdriver.Chrome
) -> None:
    config, _ = dead_lettered
    with (
        serve(facade(config)) as base,
        attacker_page(f"{base}/console/queues/{config.queue_topic}/dead-letters/redrive") as evil,
    ):
        log_in(browser, base, ADMIN_KEY)
        browser.get(evil)
        browser.find_element(By.ID, "win").click()
        wait_for(lambda: "CSRF" in text(browser, "#error-detail"), timeout_s=30, what="the form's refusal")
        assert browser.current_url.startswith(base)
        # the same request with the session's token is accepted: the token alone made the difference
        with session_client(browser, base) as http:
            page = http.get(f"/console/queues/{config.queue_topic}/dead-letters").text
            token = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            form = {"everything": "true", "rate": "1000", "csrf": token, "reason": "never-matches"}
            assert http.post(f"/console/queues/{config.queue_topic}/dead-letters/redrive", data=form).status_code == 303
    assert not any(dead.redriven for dead in read_dead_letters(config))


def test_a_cross_site_login_without_the_csrf_token_is_refused(
    make_config: MakeConfig, browser: webdriver.Chrome
) -> None:
    """A login CSRF would log the visitor in under the attacker's key: the login form carries a token too."""
    config = make_config(partitions=1)
    with (
        serve(facade(config)) as base,
        attacker_page(f"{base}/console/login", {"key": ADMIN_KEY}) as evil,
    ):
        browser.delete_all_cookies()
        browser.get(f"{base}/console/login")  # the visitor's browser holds the login form's cookie
        assert browser.get_cookie("kmq_console_login") is not None
        browser.get(evil)
        browser.find_element(By.ID, "win").click()
        wait_for(lambda: "CSRF" in text(browser, "#error-detail"), timeout_s=30, what="the login's refusal")
        assert browser.current_url.startswith(base)
        assert browser.get_cookie("kmq_console") is None, "the attacker's key must not have logged the visitor in"
        with httpx.Client(base_url=base, timeout=30) as http:
            answer = http.post("/console/login", data={"key": ADMIN_KEY})
            assert answer.status_code == 403 and "kmq_console" not in answer.cookies, answer.text
            # the same key with the form's token (and its cookie) logs in: the token alone made the difference
            assert http_log_in(http, ADMIN_KEY).status_code == 303


def test_logging_out_needs_the_sessions_csrf_token(make_config: MakeConfig, browser: webdriver.Chrome) -> None:
    """A page of another site cannot end the visitor's session; the console's own log-out button can."""
    config = make_config(partitions=1)
    with serve(facade(config)) as base, attacker_page(f"{base}/console/logout") as evil:
        log_in(browser, base, READ_KEY)
        browser.get(evil)
        browser.find_element(By.ID, "win").click()
        wait_for(lambda: "CSRF" in text(browser, "#error-detail"), timeout_s=30, what="the log-out's refusal")
        browser.get(f"{base}/console")
        assert "(read-only)" in text(browser, "#who"), "the cross-site form must not have ended the session"
        browser.find_element(By.CSS_SELECTOR, ".logout button").click()
        wait_for(lambda: browser.find_elements(By.ID, "key"), timeout_s=30, what="the login form after logging out")
        assert browser.get_cookie("kmq_console") is None
        with httpx.Client(base_url=base, timeout=30) as http:
            # no session: nothing to end, the visitor goes to the login form
            assert http.post("/console/logout").status_code == 303


class _Attacker(http.server.BaseHTTPRequestHandler):
    target = ""
    fields: dict[str, str] = {}  # noqa: RUF012  # replaced per page, never mutated

    def do_GET(self) -> None:  # http.server's name for it
        hidden = "".join(f'<input type="hidden" name="{name}" value="{value}">' for name, value in self.fields.items())
        body = (
            f'<form method="post" action="{self.target}">{hidden}'
            '<button id="win" type="submit">win a prize</button></form>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def attacker_page(target: str, fields: dict[str, str] | None = None) -> Iterator[str]:
    """Another origin's page with a form posting `fields` (by default: redrive everything) to `target` (same site:
    the console's cookies go with it)."""
    handler = type(
        "Attacker", (_Attacker,), {"target": target, "fields": fields or {"everything": "true", "rate": "1000"}}
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="attacker-page", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@contextmanager
def logged_in(base: str, key: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=30) as http:
        answer = http_log_in(http, key)
        assert answer.status_code == 303, answer.text
        yield http


def test_the_overviews_last_hour_survives_a_restart_of_the_facade(make_config: MakeConfig) -> None:
    config = make_config(partitions=1)
    api = facade(config).model_copy(update={"history_topic": f"{config.queue_topic}-history"})
    send(config, *(OutgoingMessage(b"x") for _ in range(4)))

    def samples(http: httpx.Client) -> list[dict[str, int]]:
        answer = http.get("/console/overview.json")
        assert answer.status_code == 200, answer.text
        found: list[dict[str, int]] = answer.json()["queues"][0]["samples"]
        return found

    with serve(api) as base, logged_in(base, READ_KEY) as http:
        first = wait_for(lambda: samples(http), timeout_s=30, what="a first sample")
        assert first[0]["backlog"] == 4 and first[0]["written"] == 4
    with serve(api) as base, logged_in(base, READ_KEY) as http:
        # read back in the background once the facade is up
        wait_for(lambda: first[0] in samples(http), timeout_s=30, what="the sample taken before the restart")


def test_dead_letters_moved_to_another_queue_then_purged_after_a_confirmation_naming_the_count(
    dead_lettered: tuple[KmqConfig, RejectFirstTime], make_config: MakeConfig, browser: webdriver.Chrome, shots: Path
) -> None:
    config, _ = dead_lettered
    other = make_config(partitions=1)
    with serve(facade(config, other)) as base:
        log_in(browser, base, ADMIN_KEY)
        browser.get(f"{base}/console/queues/{config.queue_topic}/dead-letters")
        row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "tr.dead-letter") if "k0" in r.text)
        row.find_element(By.CSS_SELECTOR, "input[name=pick]").click()
        Select(browser.find_element(By.NAME, "target")).select_by_value(other.queue_topic)
        browser.find_element(By.ID, "redrive").click()
        wait_for(lambda: "done: 1 sent" in text(browser, ".job-state"), timeout_s=30, what="the move's progress")
        moved = read_topic(other, other.queue_topic, 1)
        assert [(r.key, r.value) for r in moved] == [(b"k0", b"task-0")]
        # purge: the form asks first, naming the count; nothing is deleted until that is confirmed
        browser.get(f"{base}/console/queues/{config.queue_topic}/dead-letters")
        browser.find_element(By.CSS_SELECTOR, "#purge-form input[name=offset]").clear()
        browser.find_element(By.CSS_SELECTOR, "#purge-form input[name=offset]").send_keys("2")
        browser.find_element(By.ID, "purge").click()
        wait_for(lambda: "This deletes 2 dead letters" in text(browser, "#purge-count"), 30, what="the confirmation")
        screenshot(browser, shots, "purge-confirm")
        assert len(read_dead_letters(config)) == 3
        browser.find_element(By.ID, "purge-confirm").click()
        wait_for(lambda: text(browser, "#matched").startswith("1 dead letters match"), timeout_s=30, what="the purge")
    assert [dead.offset for dead in read_dead_letters(config)] == [2]
