"""The console's test harness: Debian's chromium driven by Selenium, and the facade under uvicorn on a loopback port.

Screenshots go to the test session's tmp dir and, when `KMQ_CONSOLE_SCREENSHOTS` names a folder (the docs' images
are made so), there too."""

from __future__ import annotations

import io
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from kmq_api.app import create_app
from kmq_api.config import ApiConfig
from tests.helpers import unavailable, wait_for

WINDOW = (1100, 720)
CHROMIUM = ("chromium", "chromium-browser")


def start_browser() -> webdriver.Chrome:
    """A headless chromium (root needs --no-sandbox), through chromium-driver: nothing is downloaded."""
    binary = next((found for name in CHROMIUM if (found := shutil.which(name))), None)
    driver_path = shutil.which("chromedriver")
    if binary is None or driver_path is None:
        unavailable("the console's browser tests need chromium and chromium-driver (scripts/test installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    options.add_argument(f"--window-size={WINDOW[0]},{WINDOW[1]}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver_path))


@contextmanager
def serve(config: ApiConfig, history_interval_s: float | None = None) -> Iterator[str]:
    """The facade (its lifespan as in production) on a free loopback port; its base URL. `history_interval_s`: how
    often the overview samples the queues (10 s in production), for a test that waits on several samples."""
    app = create_app(config)
    if history_interval_s is not None:
        app.state.console_history.interval_s = history_interval_s
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, name="console-under-test", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), timeout_s=60, what="uvicorn to start")
        assert server.started, "uvicorn did not start (see the log above)"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)
        assert not thread.is_alive(), "the facade under test did not stop"


def log_in(browser: webdriver.Chrome, base: str, key: str) -> None:
    browser.delete_all_cookies()
    browser.get(f"{base}/console/login")
    browser.find_element(By.ID, "key").send_keys(key)
    browser.find_element(By.ID, "login").click()
    wait_for(lambda: browser.find_elements(By.ID, "who"), timeout_s=30, what="the overview after logging in")


def http_log_in(http: httpx.Client, key: str) -> httpx.Response:
    """Log `http` in with `key` as the login form does: its CSRF token and login cookie, then the key."""
    form = http.get("/console/login")
    assert form.status_code == 200, form.text
    token = form.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    return http.post("/console/login", data={"key": key, "csrf": token})


def screenshot(browser: webdriver.Chrome, folder: Path, name: str) -> None:
    """`name`.png in `folder` (the test's artifacts) and, reduced to 64 colours (small enough to commit), in
    $KMQ_CONSOLE_SCREENSHOTS when set."""
    png = browser.get_screenshot_as_png()
    (folder / f"{name}.png").write_bytes(png)
    extra = os.environ.get("KMQ_CONSOLE_SCREENSHOTS")
    if extra:
        from PIL import Image  # pillow: the dev extra's matplotlib brings it

        Path(extra).mkdir(parents=True, exist_ok=True)
        image = Image.open(io.BytesIO(png)).convert("RGB").quantize(64)
        image.save(Path(extra) / f"{name}.png", optimize=True)


def text(browser: webdriver.Chrome, css: str) -> str:
    """The text of every element `css` selects; "" while the page is being replaced (callers wait on it)."""
    try:
        return "\n".join(element.text for element in browser.find_elements(By.CSS_SELECTOR, css))
    except StaleElementReferenceException:
        return ""
