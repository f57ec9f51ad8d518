"""Standard Webhooks signing: the spec's reference vector and tamper detection."""

from __future__ import annotations

from payflow.webhooks.signing import secret_bytes, sign, signature_headers, verify

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'


def test_reference_vector_from_the_spec() -> None:
    assert (
        sign(SECRET, MSG_ID, TIMESTAMP, BODY) == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    )


def test_verify_accepts_the_signature_and_refuses_tampering() -> None:
    header = sign(SECRET, MSG_ID, TIMESTAMP, BODY)
    assert verify(SECRET, MSG_ID, TIMESTAMP, BODY, header)
    assert verify(SECRET, MSG_ID, TIMESTAMP, BODY, "v1,bogus " + header)
    assert not verify(SECRET, MSG_ID, TIMESTAMP, BODY + b" ", header)
    assert not verify(SECRET, MSG_ID, TIMESTAMP + 1, BODY, header)
    assert not verify(SECRET, "msg_other", TIMESTAMP, BODY, header)


def test_plain_secrets_are_used_as_utf8_bytes() -> None:
    assert secret_bytes("plain-secret") == b"plain-secret"
    headers = signature_headers("plain-secret", "msg_1", 1, b"{}")
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature", "content-type"}
    assert verify("plain-secret", "msg_1", 1, b"{}", headers["webhook-signature"])


def test_generated_merchant_secrets_decode_as_the_spec_says() -> None:
    """`payflow merchants create` secrets are whsec_ + standard base64 of 32 bytes."""
    import base64

    from payflow.api.auth import new_webhook_secret

    for _ in range(200):
        secret = new_webhook_secret()
        key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        assert len(key) == 32
        assert secret_bytes(secret) == key
        assert verify(secret, MSG_ID, TIMESTAMP, BODY, sign(secret, MSG_ID, TIMESTAMP, BODY))
