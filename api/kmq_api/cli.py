"""`kmq api` and `python -m kmq_api`: serve the REST facade with uvicorn, configured from `KMQ_*` variables."""

from __future__ import annotations

import gc
import logging
from types import FrameType
from typing import Annotated, Any

import typer
import uvicorn

from kmq.admin import check_topics
from kmq.cli.errors import fail, friendly_errors
from kmq.cli.options import BootstrapOption, parse_log_level
from kmq.cli.options import settings_epilog as shared_epilog
from kmq.cli.stopping import StopBeforeStart, Stopping
from kmq.stop_watch import StopWatch
from kmq_api.app import create_app
from kmq_api.config import ApiConfig

HostOption = Annotated[str | None, typer.Option("--host", help="listen address (0.0.0.0) (env KMQ_API_HOST)")]
PortOption = Annotated[
    int | None, typer.Option("--port", min=1, max=65535, help="listen port (8080) (env KMQ_API_PORT)")
]
# Below the facade's terminationGracePeriodSeconds (60 s, deploy/kubernetes/base/api-deployment.yaml): what the
# stop has not flushed by then is given up, and the process exits 1.
STOP_TIMEOUT_MS = 50_000
LogLevelOption = Annotated[str, typer.Option("--log-level", help="debug, info, warning or error")]
MarkerFormatOption = Annotated[
    str | None,
    typer.Option("--marker-format", help="kmq or batch, for every queue served (env KMQ_MARKER_FORMAT)"),
]


@friendly_errors
def api(
    bootstrap_servers: BootstrapOption = None,
    host: HostOption = None,
    port: PortOption = None,
    log_level: LogLevelOption = "info",
    marker_format: MarkerFormatOption = None,
) -> None:
    """Serve the REST facade (OpenAPI docs at /docs) until SIGTERM or Ctrl-C.

    Configured by KMQ_API_QUEUES, KMQ_API_KEYS (or KMQ_API_ALLOW_ANONYMOUS=true), KMQ_API_RECEIPT_SECRET and
    the other KMQ_API_* variables below, and the shared KMQ_* settings (KMQ_BOOTSTRAP_SERVERS, KMQ_MSG_TIMEOUT_MS,
    ...); flags win.
    """
    stopping = Stopping("api", STOP_TIMEOUT_MS)
    try:
        _api(stopping, bootstrap_servers, host, port, parse_log_level(log_level), marker_format)
    except StopBeforeStart:
        logging.getLogger(__name__).info("the API stopped during its start-up")


def _api(
    stopping: Stopping,
    bootstrap_servers: str | None,
    host: str | None,
    port: int | None,
    level: int,
    marker_format: str | None,
) -> None:
    overrides: dict[str, Any] = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    kmq_overrides = {"bootstrap_servers": bootstrap_servers} if bootstrap_servers is not None else {}
    config = ApiConfig.from_env(kmq_overrides, **overrides)
    if marker_format is not None:
        queues = tuple(queue.with_overrides(marker_format=marker_format) for queue in config.queues)
        config = config.model_copy(update={"queues": queues})
    # Checked here, in one line through friendly_errors, rather than by the app's start-up inside uvicorn, which
    # reports a missing topic or an unreachable broker as a page of traceback.
    _check_topics(config)
    serve(config, level, stopping)


def _check_topics(config: ApiConfig) -> None:
    """Every queue's topics exist and line up; librdkafka's connection retries stay out of the one-line error."""
    kafka_log = logging.getLogger("kmq.kafka")
    before = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)
    try:
        for queue in config.queues:
            check_topics(queue)
    finally:
        kafka_log.setLevel(before)


class _Server(uvicorn.Server):
    """uvicorn's server, whose stop on SIGTERM/SIGINT cannot outlive `watch`'s timeout."""

    def __init__(self, config: uvicorn.Config, watch: StopWatch | None) -> None:
        super().__init__(config)
        self.watch = watch

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.watch is not None:
            self.watch.arm()
        super().handle_exit(sig, frame)


def serve(config: ApiConfig, log_level: int = logging.INFO, stopping: Stopping | None = None) -> None:
    """Run uvicorn with the app until it is stopped (uvicorn handles SIGTERM: the lifespan then flushes). A
    background thread or task of the app that dies stops the server too: then exit 1, so a supervisor restarts it.
    With `stopping` (the command's signal handling), a stop that outlives its timeout ends the process (exit 1)."""
    server: uvicorn.Server | None = None

    def stop_server() -> None:  # from any thread: uvicorn's main loop looks at the flag every 0.1 s
        if server is not None:
            server.should_exit = True

    app = create_app(config, on_failure=stop_server)
    watch = stopping.watch if stopping is not None else None
    server = _Server(uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level), watch)
    if stopping is not None:
        # uvicorn installs its own handlers while it runs, then puts these back and raises the signal it caught
        # again: that only asks the stopped server to stop once more.
        stopping.running(lambda signum: setattr(server, "should_exit", True))
    # This process is the application, so it may tune the collector (kmq, a library, never does): what exists now
    # (modules, FastAPI's and pydantic's schemas) lives as long as the process, and every full collection would
    # walk it again, on the event loop, in the middle of requests.
    gc.collect()
    gc.freeze()
    try:
        server.run()
    except SystemExit:  # uvicorn's exit when the app's start-up failed
        if stopping is None or not stopping.requested:
            raise
        logging.getLogger(__name__).warning("the API stopped during its start-up, which failed (see above)")
        return
    if watch is not None:
        watch.disarm()
    failure = app.state.kmq_failure()
    if failure is not None:
        raise fail(f"the API stopped: {failure}")


def settings_epilog() -> str:
    return shared_epilog(ApiConfig.env_names())


def register(app: typer.Typer) -> None:
    app.command("api", epilog=settings_epilog())(api)


def main() -> None:
    """`python -m kmq_api`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(epilog=settings_epilog())(api)
    app(prog_name="python -m kmq_api")
