"""`Silence`, the pure state behind kmq.liveness: when to probe a client's brokers, and when its silence is too long."""

from __future__ import annotations

import socket

from kmq.liveness import Silence, bootstrap_accepts


def test_a_client_heard_from_is_not_probed_and_never_too_long() -> None:
    silence = Silence(unavailable_after_ms=6000, now_ms=0)
    assert silence.probe_interval_ms == 1000
    silence.heard(900)
    assert not silence.probe_due(1899) and silence.probe_due(1900)
    silence.heard(7000)
    assert silence.silent_ms(7500) == 500 and not silence.too_long(12_999)


def test_failed_probes_let_the_silence_grow_until_it_is_too_long() -> None:
    # Given a client last heard from at 0
    silence = Silence(unavailable_after_ms=6000, now_ms=0)
    # When every probe fails from 1 000 ms on, then one is due every interval, and the silence is too long once
    # probes have failed for 6 000 ms
    for now_ms in range(1000, 7000, 1000):
        assert silence.probe_due(now_ms)
        silence.probed(now_ms, answered=False)
        assert not silence.probe_due(now_ms + 999)
        assert not silence.too_long(now_ms)
    assert silence.too_long(7000) and silence.silent_ms(7000) == 7000
    # When a probe is answered, then the client is fine again
    silence.probed(7500, answered=True)
    assert not silence.too_long(7500) and silence.silent_ms(8000) == 500


def test_one_failed_probe_after_a_long_unused_stretch_is_not_too_long() -> None:
    # Given a client nobody used for a minute (its handlers ran long jobs)
    silence = Silence(unavailable_after_ms=6000, now_ms=0)
    # When its first probe since fails, then the failure has only begun
    silence.probed(60_000, answered=False)
    assert silence.silent_ms(60_000) == 60_000 and not silence.too_long(60_000)
    assert silence.too_long(66_000)


def test_a_late_heard_never_moves_the_clock_back() -> None:
    silence = Silence(unavailable_after_ms=6000, now_ms=5000)
    silence.heard(1000)
    assert silence.silent_ms(5000) == 0


def test_bootstrap_accepts_needs_one_server_that_accepts_a_connection() -> None:
    assert not bootstrap_accepts("127.0.0.1:1", timeout_s=0.5)
    assert not bootstrap_accepts("not-a-server", timeout_s=0.5)
    with socket.create_server(("127.0.0.1", 0)) as server:
        assert bootstrap_accepts(f"127.0.0.1:1,127.0.0.1:{server.getsockname()[1]}", timeout_s=0.5)
