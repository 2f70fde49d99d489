"""The console's sessions (signed cookies) and its dead-letter filters: no broker, no browser."""

from __future__ import annotations

from dataclasses import replace

from pydantic import SecretStr

from kmq.config import KmqConfig
from kmq.dlq import DeadLetter
from kmq_api.config import ApiConfig
from kmq_api.console.selection import Filters, Picked, parse_time_ms
from kmq_api.console.session import SESSION_TTL_MS, SessionSigner, find_key

QUEUE = KmqConfig(bootstrap_servers="localhost:9092", queue_topic="orders")
NOW_MS = 1_800_000_000_000


def _config(**changes: object) -> ApiConfig:
    fields: dict[str, object] = {
        "queues": (QUEUE,),
        "receipt_secret": "s" * 32,
        "api_keys": (SecretStr("reader"),),
        "admin_keys": (SecretStr("boss"),),
    }
    return ApiConfig(**{**fields, **changes})


def _cookie(config: ApiConfig, key: str) -> str:
    found = find_key(config, key)
    assert found is not None
    return SessionSigner(config).issue(found[0], NOW_MS)


def test_a_session_names_its_key_and_rights_until_it_expires() -> None:
    config = _config()
    assert find_key(config, "nobody") is None
    admin = SessionSigner(config).viewer(_cookie(config, "boss"), NOW_MS + 1)
    reader = SessionSigner(config).viewer(_cookie(config, "reader"), NOW_MS + 1)
    assert admin is not None and admin.admin and admin.name.startswith("admin-") and "boss" not in admin.name
    assert reader is not None and not reader.admin and reader.name.startswith("read-")
    assert admin.csrf != reader.csrf
    assert SessionSigner(config).viewer(_cookie(config, "boss"), NOW_MS + SESSION_TTL_MS) is None


def test_the_login_forms_token_holds_only_for_its_own_nonce_and_secret() -> None:
    signer = SessionSigner(_config())
    token = signer.login_token("nonce-a")
    assert signer.login_token_valid("nonce-a", token)
    assert not signer.login_token_valid("nonce-b", token)
    assert not signer.login_token_valid(None, token) and not signer.login_token_valid("", signer.login_token(""))
    assert not signer.login_token_valid("nonce-a", "")
    assert not SessionSigner(_config(receipt_secret="t" * 32)).login_token_valid("nonce-a", token)


def test_a_forged_or_foreign_cookie_is_no_session() -> None:
    config = _config()
    cookie = _cookie(config, "reader")
    payload, signature = cookie.rsplit(".", 1)
    signer = SessionSigner(config)
    assert signer.viewer(f"{payload}x.{signature}", NOW_MS) is None
    assert signer.viewer(f"{payload}.{'0' * len(signature)}", NOW_MS) is None
    assert signer.viewer("", NOW_MS) is None
    assert SessionSigner(_config(receipt_secret="t" * 32)).viewer(cookie, NOW_MS) is None


def test_a_key_removed_or_demoted_takes_effect_on_its_sessions_at_once() -> None:
    cookie = _cookie(_config(), "boss")
    assert SessionSigner(_config(admin_keys=())).viewer(cookie, NOW_MS) is None
    demoted = SessionSigner(_config(api_keys=(SecretStr("boss"),), admin_keys=())).viewer(cookie, NOW_MS)
    assert demoted is not None and not demoted.admin


def _dead(offset: int, key: bytes, reason: str, ts: int, headers: list[tuple[str, bytes | None]]) -> DeadLetter:
    return DeadLetter(0, offset, key, b"v", headers, reason, "orders", 0, offset, 0, ts, ts)


def test_filters_match_reason_key_header_and_time() -> None:
    dead = _dead(5, b"order-7", "rejected: bad", NOW_MS, [("tenant", b"acme")])
    assert Filters().matches(dead) and Filters().selects_all
    assert Filters(reason="bad", key="der-7", header="tenant=acme").matches(dead)
    assert Filters(header="tenant").matches(dead)
    assert not Filters(header="tenant=other").matches(dead)
    assert not Filters(key="order-8").matches(dead)
    since = "2027-01-15T08:00:00"  # NOW_MS is 2027-01-15T08:00:00Z
    assert parse_time_ms(since) == NOW_MS
    assert Filters(since=since, until="2027-01-15T09:00:00+01:00").matches(dead)
    assert not Filters(since="2027-01-15T08:00:01").matches(dead)
    assert not Filters(pending=True).matches(_redriven(dead))


def test_picks_select_positions() -> None:
    picked = Picked.parse(["0:5", "1:2"])
    assert picked.matches(_dead(5, b"k", "r", NOW_MS, []))
    assert not picked.matches(_dead(6, b"k", "r", NOW_MS, []))


def _redriven(dead: DeadLetter) -> DeadLetter:
    return replace(dead, redriven=True)
