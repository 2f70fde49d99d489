"""What a machine lacks fails the test unless the caller opts in to skipping (KMQ_ALLOW_SKIPS=1), CI or not."""

from __future__ import annotations

import pytest

from tests.helpers import needs, unavailable

# The outcomes pytest gives the two calls (its own exception types: a failure and a skip).
FAILED = pytest.fail.Exception
SKIPPED = pytest.skip.Exception


@pytest.mark.parametrize("ci", [None, "true"], ids=["no CI", "CI=true"])
@pytest.mark.parametrize(("allow", "outcome"), [(None, FAILED), ("0", FAILED), ("1", SKIPPED)])
def test_a_missing_tool_fails_unless_skips_are_allowed(
    monkeypatch: pytest.MonkeyPatch, ci: str | None, allow: str | None, outcome: type[BaseException]
) -> None:
    for name, value in (("CI", ci), ("KMQ_ALLOW_SKIPS", allow)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    with pytest.raises(outcome, match="mvn is not installed"):
        unavailable("mvn is not installed")
    with pytest.raises(outcome, match="curl is not installed"):
        needs(False, "curl is not installed")


def test_what_the_machine_has_neither_fails_nor_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KMQ_ALLOW_SKIPS", raising=False)
    needs(True, "never said")


def test_the_failure_says_how_to_skip_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KMQ_ALLOW_SKIPS", raising=False)
    with pytest.raises(FAILED, match=r"KMQ_ALLOW_SKIPS=1"):
        unavailable("no Docker")
