"""The send-time SSRF guard."""

from __future__ import annotations

import pytest

from payflow.errors import BadInput
from payflow.webhooks.ssrf import check_webhook_url, resolve_and_check


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://10.0.0.5/x",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://0.0.0.0/x",
        "http://224.0.0.1/x",
        "ftp://example.com/x",
        "http:///nohost",
        "http://user:pw@example.com/x",
    ],
)
def test_unsafe_urls_are_refused(url: str) -> None:
    with pytest.raises(BadInput):
        check_webhook_url(url, ())


def test_allowed_hosts_and_public_literals_pass() -> None:
    check_webhook_url("http://127.0.0.1:9000/hook", ("127.0.0.1",))
    check_webhook_url("https://93.184.215.14/hook", ())
    check_webhook_url("https://hooks.example.com/x", ())  # names are checked after resolution


async def test_a_name_resolving_to_loopback_is_refused_at_send_time() -> None:
    with pytest.raises(BadInput, match="non-public"):
        await resolve_and_check("http://localhost:8080/hook", ())
    await resolve_and_check("http://localhost:8080/hook", ("localhost",))
