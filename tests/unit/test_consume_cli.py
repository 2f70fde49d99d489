"""`kmq consume` without a broker: a message is acknowledged only once it has been printed."""

from __future__ import annotations

import io
from types import TracebackType
from typing import Any, ClassVar

import pytest
import typer
from typer.testing import CliRunner

from kmq.cli import consume as consume_module
from kmq.cli.errors import BROKEN_PIPE, StdoutConsole
from kmq.message import Message

runner = CliRunner()


class FakeClient:
    """Hands out one batch of three messages, then nothing; records what was acknowledged."""

    acknowledged: ClassVar[list[int]] = []

    def __init__(self, config: Any) -> None:
        self.batches = [[Message(f"m{i}".encode(), None, "q", 0, i, 1_000, 0, 31_000) for i in range(3)]]

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        pass

    def receive(self, max_messages: int, timeout_s: float) -> list[Message]:
        return self.batches.pop(0) if self.batches else []

    def processed(self, msg: Message) -> None:
        FakeClient.acknowledged.append(msg.offset)


class ClosedAfter(io.StringIO):
    """An output whose reader goes away after `lines` lines (`kmq consume | head -n lines`)."""

    def __init__(self, lines: int, error: type[BaseException]) -> None:
        super().__init__()
        self.left, self.error = lines, error

    def write(self, text: str) -> int:
        if self.left == 0:
            raise self.error()
        self.left -= text.count("\n")
        return super().write(text)


def run(monkeypatch: pytest.MonkeyPatch, out: io.StringIO) -> Any:
    FakeClient.acknowledged = []
    monkeypatch.setattr(consume_module, "KmqClient", FakeClient)
    assert isinstance(consume_module._out, StdoutConsole)
    monkeypatch.setattr(consume_module, "_out", StdoutConsole(file=out, highlight=False, soft_wrap=True))
    single = typer.Typer()
    single.command()(consume_module.consume)
    return runner.invoke(single, ["-b", "b:1", "-q", "q", "--max", "3"])


def test_every_printed_message_is_acknowledged(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    result = run(monkeypatch, out)
    assert result.exit_code == 0, result.output
    assert FakeClient.acknowledged == [0, 1, 2]
    assert out.getvalue().splitlines() == ["0:0 m0", "0:1 m1", "0:2 m2"]


def test_a_closed_pipe_leaves_the_unprinted_messages_unacknowledged_and_ends_quietly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = run(monkeypatch, ClosedAfter(1, BrokenPipeError))
    assert FakeClient.acknowledged == [0]
    assert result.exit_code == BROKEN_PIPE
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


def test_ctrl_c_while_printing_leaves_that_message_unacknowledged(monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(monkeypatch, ClosedAfter(2, KeyboardInterrupt))
    assert FakeClient.acknowledged == [0, 1]
    assert result.exit_code == 130
