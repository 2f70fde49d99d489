"""The consoles of the commands: on a terminal, rich's own (its width, colours); piped or redirected to a file, lines
as long as their text (rich would wrap them at 80 columns, "dead-lettered \n6") and no colour codes."""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleDimensions

# Wider than any line or table of the commands: rich sizes a table to its content, so nothing is padded to this.
UNWRAPPED_WIDTH = 1000


class OutputConsole(Console):
    """A `rich.console.Console` that does not wrap when its output is not a terminal (rich leaves colours out there
    already, unless FORCE_COLOR asks for them)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**{"highlight": False, "soft_wrap": True, **options})

    @property
    def size(self) -> ConsoleDimensions:
        measured = super().size
        return measured if self.is_terminal else ConsoleDimensions(UNWRAPPED_WIDTH, measured.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]  # rich's own setter, through the override
