"""The progress display of `kmq bench`: which run of which contender, its phase, and messages done."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from kmq.bench.options import WARM_UP_ROUND
from kmq.bench.results import Run, headline


class RichDisplay:
    """Two bars on stderr: the runs, and the current run's messages (its phase while it has no count)."""

    def __init__(self, console: Console | None = None) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            transient=True,
        )
        self._runs: TaskID | None = None
        self._current: TaskID | None = None
        self._label = ""

    def begin(self, total_runs: int) -> None:
        self._progress.start()
        self._runs = self._progress.add_task("runs", total=total_runs)

    def run_started(self, contender: str, round_: int) -> None:
        self._label = f"{contender} warm-up (not counted)" if round_ == WARM_UP_ROUND else f"{contender} #{round_ + 1}"
        if self._current is not None:
            self._progress.remove_task(self._current)
        self._current = self._progress.add_task(self._label, total=None)

    def phase(self, text: str) -> None:
        if self._current is not None:
            self._progress.update(self._current, description=f"{self._label}: {text}")

    def progress(self, done: int, total: int) -> None:
        if self._current is not None:
            self._progress.update(self._current, completed=done, total=total)

    def run_finished(self, run: Run) -> None:
        if self._runs is not None:
            self._progress.advance(self._runs)
        self._progress.console.print(headline(run), highlight=False)

    def end(self) -> None:
        self._progress.stop()

    def __enter__(self) -> RichDisplay:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.end()
