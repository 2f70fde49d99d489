"""The fast lane of receive and ack takes only the requests FastAPI would hand to the endpoint; the rest (and so every
error answer) stays FastAPI's. Its answers are checked end to end by the facade's integration tests and the schema
fuzzing, which go through it; here, which requests it takes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from pydantic import SecretStr

from api import hot
from api.models import AckRequest, ReceiveRequest

KEY = b"the-key"
JSON = (b"content-type", b"application/json")
BEARER = (b"authorization", b"Bearer " + KEY)


def scope(
    path: str = "/v1/queues/q/ack", method: str = "POST", headers: Any = (BEARER, JSON), closing: bool = False
) -> Any:
    served = SimpleNamespace(name="q")
    config = SimpleNamespace(api_keys=(SecretStr(KEY.decode()),), allow_anonymous=False)
    kmq = SimpleNamespace(queues={"q": served}, config=config, closing=closing)
    return {"type": "http", "method": method, "path": path, "headers": list(headers), "state": {"kmq": kmq}}


def test_a_well_formed_receive_or_ack_for_a_served_queue_with_a_good_key_takes_the_fast_lane() -> None:
    for action, model in (("ack", AckRequest), ("receive", ReceiveRequest)):
        target = hot._target(scope(f"/v1/queues/q/{action}"))
        assert target is not None and target[0].name == "q" and target[2][0] is model


@pytest.mark.parametrize(
    "request_scope",
    [
        scope(headers=(JSON,)),  # no key: FastAPI's 401
        scope(headers=((b"authorization", b"Bearer other"), JSON)),
        scope(headers=((b"authorization", b"Basic " + KEY), JSON)),
        scope(headers=(BEARER, JSON, BEARER)),  # a header twice: FastAPI decides which counts
        scope(headers=(BEARER,)),  # no content type: FastAPI parses it leniently
        scope(headers=(BEARER, (b"content-type", b"application/json; charset=utf-8"))),
        scope("/v1/queues/other/ack"),  # not served: FastAPI's 404
        scope("/v1/queues/q/ack/"),
        scope("/v1/queues/q/nack"),
        scope("/v1/queues/q/ack", method="GET"),
        scope(closing=True),  # shutting down: FastAPI's answer
    ],
)
def test_anything_else_goes_to_fastapi(request_scope: Any) -> None:
    assert hot._target(request_scope) is None


def test_open_access_needs_no_key() -> None:
    request_scope = scope(headers=(JSON,))
    request_scope["state"]["kmq"].config = SimpleNamespace(api_keys=(), allow_anonymous=True)
    assert hot._target(request_scope) is not None


@pytest.mark.parametrize(
    "body",
    [
        None,  # the client left before its body
        b"",
        b"{",
        b'{"receipts": ["a"], "receipts2": 1}',  # extra field: 422 from FastAPI
        b'{"receipts": []}',
        b'{"receipts": "a"}',
        b'{"receipts": [NaN]}',  # json.loads reads NaN, orjson does not: FastAPI answers
        b"\xef\xbb\xbf" + b'{"receipts": ["a"]}',  # a BOM, which json.loads accepts
    ],
)
def test_a_body_that_does_not_parse_or_validate_strictly_goes_to_fastapi(body: bytes | None) -> None:
    assert hot._parse(AckRequest, body) is None


def test_a_valid_body_is_the_routes_model() -> None:
    assert hot._parse(AckRequest, orjson.dumps({"receipts": ["a", "b"]})) == AckRequest(receipts=["a", "b"])
    parsed = hot._parse(ReceiveRequest, b'{"max_messages": 100.0, "wait_ms": 500}')
    assert parsed == ReceiveRequest(max_messages=100, wait_ms=500)
