"""TokenBucket and Backoff: the pure pacing of redeliveries."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmq_tracker.pacing import Backoff, TokenBucket


def test_bucket_starts_full_and_refills_at_the_rate() -> None:
    bucket = TokenBucket(rate_per_s=10, burst=5, now_ms=0)
    assert bucket.available(0) == 5
    bucket.take(5, 0)
    assert bucket.available(0) == 0
    assert bucket.next_token_ms(0) == 101  # one token every 100 ms, rounded up
    assert bucket.available(100) == 1
    assert bucket.available(10_000) == 5  # never more than the burst


def test_bucket_next_token_is_now_when_one_is_available() -> None:
    bucket = TokenBucket(rate_per_s=1, burst=1, now_ms=1_000)
    assert bucket.next_token_ms(1_000) == 1_000


def test_bucket_ignores_a_clock_that_goes_back() -> None:
    bucket = TokenBucket(rate_per_s=1_000, burst=10, now_ms=1_000)
    bucket.take(10, 1_000)
    assert bucket.available(900) == 0
    assert bucket.available(1_005) == 5


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 1), (1, 0)])
def test_bucket_rejects_nonsense(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="rate_per_s"):
        TokenBucket(rate, burst, 0)


@given(
    rate=st.integers(1, 100_000),
    burst=st.integers(1, 1_000),
    steps=st.lists(st.integers(0, 2_000), min_size=1, max_size=50),
)
def test_bucket_never_lets_more_through_than_burst_plus_rate(rate: int, burst: int, steps: list[int]) -> None:
    bucket = TokenBucket(rate, burst, 0)
    now = taken = 0
    for step in steps:
        now += step
        available = bucket.available(now)
        bucket.take(available, now)
        taken += available
        assert taken <= burst + rate * now / 1000 + 1e-6


def test_backoff_doubles_up_to_the_maximum_and_resets() -> None:
    backoff = Backoff(base_ms=100, max_ms=350)
    assert backoff.ready(0)
    assert backoff.failed(1_000) == 1_100
    assert not backoff.ready(1_099)
    assert backoff.ready(1_100)
    assert backoff.failed(2_000) == 2_200
    assert backoff.failed(3_000) == 3_350
    assert backoff.failed(4_000) == 4_350
    assert backoff.failures == 4
    backoff.succeeded()
    assert backoff.ready(0)
    assert backoff.failed(5_000) == 5_100
