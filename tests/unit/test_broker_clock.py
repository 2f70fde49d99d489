"""The tracker's estimate of the broker's clock (kmq_tracker.broker_clock): a min-filter of live markers' delays."""

from __future__ import annotations

from kmq_tracker.broker_clock import WINDOW_MS, ClockLead


def test_until_a_marker_is_read_the_local_clock_is_the_brokers() -> None:
    assert ClockLead().broker_ms(1_000_000) == 1_000_000


def test_a_clock_30_s_ahead_is_corrected_by_the_fastest_transit_seen() -> None:
    lead = ClockLead()
    for append, transit in ((1_000_000, 40), (1_000_100, 3), (1_000_200, 25)):
        lead.observe(append, append + 30_000 + transit)
    assert lead.lead_ms == 30_003
    assert lead.broker_ms(1_030_300) == 1_000_297  # never ahead of the broker's 1_000_300


def test_a_clock_30_s_behind_gives_a_negative_lead() -> None:
    lead = ClockLead()
    lead.observe(1_000_000, 1_000_000 - 30_000 + 5)
    assert lead.lead_ms == -29_995


def test_old_bounds_leave_the_window_so_a_clock_that_moved_is_followed() -> None:
    lead = ClockLead()
    lead.observe(1_000_000, 1_000_010)  # lead 10
    later = 1_000_000 + WINDOW_MS + 20_000
    lead.observe(later, later + 500)  # the clock was stepped 490 ms ahead since
    assert lead.lead_ms == 500
