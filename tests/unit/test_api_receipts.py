"""Receipts: signed round trips, and every kind of bad token refused rather than acted on."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmq.markers import MarkerKey
from kmq_api.receipts import MAX_TOKEN_LENGTH, Receipt, ReceiptSigner, Refusal

SECRET = b"s" * 32
QUEUE = "orders"
queues = st.from_regex(r"[a-zA-Z0-9._-]{1,249}", fullmatch=True)
receipts = st.builds(
    Receipt,
    queue=queues,
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(0, 2**63 - 1),
    issued_at_ms=st.integers(0, 2**62),
    deadline_ms=st.integers(0, 2**62),
    redelivery_count=st.integers(0, 2**32 - 1),
)


def _receipt(**changes: object) -> Receipt:
    fields: dict[str, object] = {
        "queue": QUEUE,
        "partition": 3,
        "offset": 42,
        "issued_at_ms": 1_000,
        "deadline_ms": 31_000,
        "redelivery_count": 1,
    }
    return Receipt(**{**fields, **changes})  # type: ignore[arg-type]


@given(receipts)
def test_a_signed_receipt_verifies_to_itself(receipt: Receipt) -> None:
    signer = ReceiptSigner(SECRET)
    token = signer.sign(receipt)
    assert len(token) <= MAX_TOKEN_LENGTH
    assert signer.verify(token, receipt.queue) == receipt


def test_another_replica_with_the_same_secret_accepts_it() -> None:
    token = ReceiptSigner(SECRET).sign(_receipt())
    assert ReceiptSigner(bytes(SECRET)).verify(token, QUEUE) == _receipt()


def test_a_receipt_signed_with_another_secret_is_invalid() -> None:
    token = ReceiptSigner(b"x" * 32).sign(_receipt())
    refusal = ReceiptSigner(SECRET).verify(token, QUEUE)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == "invalid"


@given(st.data())
def test_any_tampered_byte_makes_it_invalid(data: st.DataObject) -> None:
    signer = ReceiptSigner(SECRET)
    raw = bytearray(base64.urlsafe_b64decode(signer.sign(_receipt()) + "=="))
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] ^= data.draw(st.integers(1, 255))
    token = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    refusal = signer.verify(token, QUEUE)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == "invalid"


def test_a_receipt_for_another_queue_is_refused_as_wrong_queue() -> None:
    signer = ReceiptSigner(SECRET)
    refusal = signer.verify(signer.sign(_receipt(queue="payments")), QUEUE)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == "wrong_queue"
    assert "payments" in refusal.detail


@pytest.mark.parametrize(
    "token",
    ["", "not a receipt", "abc", "A" * 10, "A" * (MAX_TOKEN_LENGTH + 1), "é", "AAAA====", "+/+/"],
)
def test_garbage_is_invalid(token: str) -> None:
    refusal = ReceiptSigner(SECRET).verify(token, QUEUE)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == "invalid"


@given(st.text(max_size=600))
def test_no_string_is_ever_accepted_without_the_secret(token: str) -> None:
    assert isinstance(ReceiptSigner(SECRET).verify(token, QUEUE), Refusal)


def test_a_non_canonical_encoding_is_invalid() -> None:
    signer = ReceiptSigner(SECRET)
    token = signer.sign(_receipt())
    # The last character carries spare bits when the length is not a multiple of 3 bytes: flip them.
    assert len(base64.urlsafe_b64decode(token + "==")) % 3 != 0
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = token[:-1] + alphabet[alphabet.index(token[-1]) ^ 1]
    assert base64.urlsafe_b64decode(twin + "==") == base64.urlsafe_b64decode(token + "==")
    assert isinstance(signer.verify(twin, QUEUE), Refusal)


def test_only_the_token_itself_verifies_never_another_spelling_of_its_bytes() -> None:
    signer = ReceiptSigner(SECRET)
    token = signer.sign(_receipt())
    assert signer.verify(token, QUEUE) == _receipt()
    standard_alphabet = token.replace("-", "+").replace("_", "/")
    padded = token + "=" * (-len(token) % 4 or 4)
    spellings = {padded, token[:8] + "\n" + token[8:], token + "\n", " " + token, "\t" + token, standard_alphabet + "/"}
    if standard_alphabet != token:
        spellings.add(standard_alphabet)
    for spelling in spellings:
        refusal = signer.verify(spelling, QUEUE)
        assert isinstance(refusal, Refusal), repr(spelling)
        assert refusal.reason == "invalid"


def test_a_receipt_names_its_marker_key_and_expires_at_its_deadline() -> None:
    receipt = _receipt()
    assert receipt.marker_key == MarkerKey(3, 42)
    assert not receipt.expired(30_999)
    assert receipt.expired(31_000)


def test_an_empty_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="secret"):
        ReceiptSigner(b"")
