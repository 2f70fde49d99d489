"""The worker's circuit breaker as a state machine, given/when/then, on an explicit clock."""

from __future__ import annotations

from kmq.worker.breaker import BreakerState, CircuitBreaker


def breaker(**overrides: int | float) -> CircuitBreaker:
    settings: dict[str, int | float] = {
        "window_ms": 10_000,
        "threshold": 0.5,
        "min_calls": 10,
        "backoff_ms": 1_000,
        "backoff_max_ms": 8_000,
        "probes": 3,
        **overrides,
    }
    return CircuitBreaker(**settings)  # type: ignore[arg-type]  # the test's own keyword set


def test_opens_when_the_failure_rate_passes_the_threshold_with_enough_outcomes() -> None:
    b = breaker()
    # given 4 successes and 5 failures: 9 outcomes, under the minimum
    for i in range(4):
        assert b.record(True, 100 + i) is None
    for i in range(5):
        assert b.record(False, 200 + i) is None
    assert b.state is BreakerState.CLOSED and b.permits() is None
    # when a 10th outcome fails (6/10 > 0.5)
    opened = b.record(False, 300)
    # then it opens for the first backoff, and lets nothing start
    assert opened is not None and opened.after is BreakerState.OPEN and opened.backoff_ms == 1_000
    assert opened.failure_rate == 0.6
    assert b.permits() == 0


def test_a_failure_rate_at_the_threshold_keeps_it_closed() -> None:
    b = breaker()
    for i in range(10):
        assert b.record(i % 2 == 0, i) is None
    assert b.state is BreakerState.CLOSED


def test_old_outcomes_leave_the_window() -> None:
    b = breaker(min_calls=4)
    for i in range(3):
        b.record(False, i)
    # the failures are 10 s old when the 4th outcome comes: the window holds one failure
    assert b.record(False, 10_500) is None
    assert b.failure_rate(10_500) == 1.0
    assert b.state is BreakerState.CLOSED


def test_half_open_after_the_backoff_then_closed_by_successful_probes() -> None:
    b = breaker(min_calls=1)
    b.record(False, 0)
    assert b.poll(999) is None
    half = b.poll(1_000)
    assert half is not None and half.after is BreakerState.HALF_OPEN
    # three probes may start, no more
    assert b.permits() == 3
    b.probing(3)
    assert b.permits() == 0
    assert b.record(True, 1_100) is None
    assert b.record(True, 1_200) is None
    closed = b.record(True, 1_300)
    assert closed is not None and closed.after is BreakerState.CLOSED
    assert b.permits() is None
    # and a fresh window: one failure right after does not reopen it (min_calls=1 would, with the old one)
    assert b.failure_rate(1_300) == 0.0


def test_a_failed_probe_reopens_with_a_doubled_backoff_up_to_the_ceiling() -> None:
    b = breaker(min_calls=1)
    b.record(False, 0)
    pauses = []
    now = 0
    for _ in range(5):
        now = b.reopen_at_ms
        b.poll(now)
        b.probing(1)
        reopened = b.record(False, now + 1)
        assert reopened is not None and reopened.after is BreakerState.OPEN
        pauses.append(reopened.backoff_ms)
    assert pauses == [2_000, 4_000, 8_000, 8_000, 8_000]
    # a success after that closes and resets the backoff
    b.poll(b.reopen_at_ms)
    for i in range(3):
        b.record(True, b.reopen_at_ms + i)
    assert b.state is BreakerState.CLOSED
    reopened = b.record(False, b.reopen_at_ms + 10)
    assert reopened is not None and reopened.backoff_ms == 1_000
