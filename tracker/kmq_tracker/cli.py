"""`kmq tracker` and `python -m kmq_tracker`: run one tracker replica until SIGTERM or Ctrl-C."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer
from confluent_kafka import KafkaException

from kmq.cli.errors import friendly_errors
from kmq.cli.options import BootstrapOption, QueueOption, env_hint, parse_log_level, with_env_hint
from kmq.cli.options import settings_epilog as shared_epilog
from kmq.cli.stopping import StopBeforeStart, Stopping
from kmq.errors import ConfigError, KmqError
from kmq_tracker.config import ENV_FIELD_PREFIX, TrackerConfig
from kmq_tracker.service import TrackerService

_log = logging.getLogger(__name__)

GroupOption = Annotated[
    str | None, typer.Option("--group", help="tracker consumer group (default: M__tracker); env KMQ_TRACKER_GROUP_ID")
]
HostOption = Annotated[
    str | None, typer.Option("--http-host", help="probes/metrics address (0.0.0.0); env KMQ_TRACKER_HTTP_HOST")
]
PortOption = Annotated[
    int | None,
    typer.Option("--http-port", min=0, max=65535, help="probes/metrics port (9095); env KMQ_TRACKER_HTTP_PORT"),
]
RateOption = Annotated[
    float | None,
    typer.Option("--redelivery-rate", help="redeliveries per second (1000); env KMQ_TRACKER_REDELIVERY_RATE_PER_S"),
]
InFlightOption = Annotated[
    int | None,
    typer.Option("--max-in-flight", help="copies awaiting acks at once (500); env KMQ_TRACKER_MAX_IN_FLIGHT"),
]
CommitOption = Annotated[
    int | None,
    typer.Option("--commit-interval-ms", help="pending-tail commit period (1000); env KMQ_TRACKER_COMMIT_INTERVAL_MS"),
]
LogLevelOption = Annotated[str, typer.Option("--log-level", help="debug, info, warning or error")]


@friendly_errors
def tracker(
    bootstrap_servers: BootstrapOption = None,
    queue: QueueOption = None,
    group: GroupOption = None,
    http_host: HostOption = None,
    http_port: PortOption = None,
    redelivery_rate: RateOption = None,
    max_in_flight: InFlightOption = None,
    commit_interval_ms: CommitOption = None,
    log_level: LogLevelOption = "info",
) -> None:
    """Run the redelivery tracker: redeliver messages whose processing timed out. Stops cleanly on SIGTERM.

    Configured by KMQ_* variables (the core settings: KMQ_BOOTSTRAP_SERVERS, KMQ_QUEUE_TOPIC, ...) and
    KMQ_TRACKER_* (its own); flags win over both.
    """
    stopping = Stopping("tracker", TrackerConfig.model_fields["shutdown_timeout_ms"].default)
    _set_log_level(log_level)
    core = {"bootstrap_servers": bootstrap_servers, "queue_topic": queue}
    own = {
        "group_id": group,
        "http_host": http_host,
        "http_port": http_port,
        "redelivery_rate_per_s": redelivery_rate,
        "max_in_flight": max_in_flight,
        "commit_interval_ms": commit_interval_ms,
    }
    try:
        config = _load(_given(core), _given(own))
        stopping.watch.timeout_ms = config.shutdown_timeout_ms
        service = TrackerService(config, stop_watch=stopping.watch)
        stopping.running(lambda signum: service.request_stop())
        service.run()
    except StopBeforeStart:
        _log.info("tracker stopped during its start-up")
    except (KmqError, KafkaException) as e:
        if stopping.requested:  # asked to stop: a start-up the cluster cut short is not a failure
            _log.warning("tracker stopped during its start-up, which failed: %s", e)
            return
        raise  # one line of error (friendly_errors), exit 1
    except Exception as e:
        _log.critical("tracker stopped by an unexpected error (it left its group; restart it)", exc_info=True)
        raise typer.Exit(1) from e


def settings_epilog() -> str:
    return shared_epilog(TrackerConfig.env_names())


def register(app: typer.Typer) -> None:
    app.command("tracker", epilog=settings_epilog())(tracker)


def main() -> None:
    """`python -m kmq_tracker`."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(epilog=settings_epilog())(tracker)
    app(prog_name="python -m kmq_tracker")


def _load(core: dict[str, Any], own: dict[str, Any]) -> TrackerConfig:
    try:
        return TrackerConfig.from_env(kmq_overrides=core, **own)
    except ConfigError as e:
        raise with_env_hint(e, env_hint(e.field, TrackerConfig, ENV_FIELD_PREFIX)) from e


def _given(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _set_log_level(level: str) -> None:
    logging.getLogger("kmq_tracker").setLevel(parse_log_level(level))
    if not logging.getLogger().handlers:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
