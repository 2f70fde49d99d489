"""Redrives and moves run as jobs in a thread each, paced to a rate, their progress shown by the dead-letter page.

Every action is logged (logger `kmq_api.console.audit`): who (the key's name), what, how many. A job that fails on
Kafka says why on the page; any other error stops the facade (`on_death`), as a dead thread of it must."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException

from kmq.config import KmqConfig
from kmq.dlq import redrive
from kmq.dlq.redrive import Selection
from kmq.errors import KmqError

audit = logging.getLogger("kmq_api.console.audit")
KEPT_JOBS = 100


@dataclass
class Job:
    id: int
    who: str
    what: str
    started_ms: int
    total: int | None = None  # known once the selection is read
    done: int = 0
    finished: bool = False
    error: str | None = None
    result: str = ""


@dataclass
class JobBoard:
    """The jobs of this replica, newest last. Each job's fields are written by its thread only, under `lock`."""

    on_death: Callable[[str, BaseException], None]
    jobs: dict[int, Job] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def redrive(
        self, who: str, config: KmqConfig, selection: Selection, rate_per_s: float, target_topic: str | None = None
    ) -> Job:
        what = f"move {config.dead_letter_topic} to {target_topic}" if target_topic else f"redrive {config.queue_topic}"
        job = Job(next(self._ids), who, what, int(time.time() * 1000))
        with self.lock:
            self.jobs[job.id] = job
            for old in sorted(self.jobs)[:-KEPT_JOBS]:
                del self.jobs[old]
        audit.info("%s started job %d: %s at %.0f/s", who, job.id, what, rate_per_s)
        thread = threading.Thread(
            target=self._run, args=(job, config, selection, rate_per_s, target_topic), name=f"kmq-console-job-{job.id}"
        )
        thread.start()
        return job

    def get(self, job_id: int) -> Job | None:
        with self.lock:
            return self.jobs.get(job_id)

    def recent(self) -> list[Job]:
        with self.lock:
            return sorted(self.jobs.values(), key=lambda job: -job.id)

    def _run(
        self, job: Job, config: KmqConfig, selection: Selection, rate_per_s: float, target_topic: str | None
    ) -> None:
        started = time.monotonic()

        def progress(done: int, total: int) -> None:
            with self.lock:
                job.done, job.total = done, total
            time.sleep(max(0.0, started + done / rate_per_s - time.monotonic()))  # the pace chosen

        try:
            batch = max(1, min(500, int(rate_per_s)))
            result = redrive(config, selection, progress, batch=batch, target_topic=target_topic)
        except (KmqError, KafkaException) as e:
            with self.lock:
                job.error, job.finished = str(e), True
            audit.warning("%s: job %d (%s) failed: %s", job.who, job.id, job.what, e)
            return
        except BaseException as e:
            self.on_death(f"console job {job.id}", e)
            raise
        with self.lock:
            job.total = job.total if job.total is not None else result.redriven
            job.done, job.finished = result.redriven, True
            job.result = f"{result.redriven} sent, {result.already} redriven before, {result.foreign} from elsewhere"
        audit.info("%s: job %d (%s) done: %s", job.who, job.id, job.what, job.result)
