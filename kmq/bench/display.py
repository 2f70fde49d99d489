"""What the runner tells whoever watches: `Display` (the CLI draws a rich progress display; library use is silent)."""

from __future__ import annotations

from typing import Protocol

from kmq.bench.results import Run


class Display(Protocol):
    def begin(self, total_runs: int) -> None: ...

    def run_started(self, contender: str, round_: int) -> None: ...

    def phase(self, text: str) -> None: ...

    def progress(self, done: int, total: int) -> None: ...

    def run_finished(self, run: Run) -> None: ...

    def end(self) -> None: ...


class Silent:
    """A Display that shows nothing."""

    def begin(self, total_runs: int) -> None:
        pass

    def run_started(self, contender: str, round_: int) -> None:
        pass

    def phase(self, text: str) -> None:
        pass

    def progress(self, done: int, total: int) -> None:
        pass

    def run_finished(self, run: Run) -> None:
        pass

    def end(self) -> None:
        pass
