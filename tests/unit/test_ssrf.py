"""The send-time SSRF guard: names are resolved right before each delivery."""

from __future__ import annotations

import pytest

from payflow.errors import BadInput
from payflow.webhooks.ssrf import resolve_webhook_url
from tests.fake_dns import FakeDns


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    return FakeDns(monkeypatch)


async def test_a_name_resolving_to_loopback_is_refused_at_send_time() -> None:
    with pytest.raises(BadInput):
        await resolve_webhook_url("http://localhost:8080/hook", ())
    assert "127.0.0.1" in await resolve_webhook_url("http://localhost:8080/hook", ("localhost",))


async def test_an_allowed_ip_literal_passes_at_send_time() -> None:
    assert await resolve_webhook_url("http://127.0.0.1:9000/hook", ("127.0.0.1",)) == ["127.0.0.1"]


@pytest.mark.parametrize(
    "answer",
    [
        "::ffff:127.0.0.1",
        "::127.0.0.1",
        "64:ff9b::a01:203",  # NAT64 of 10.1.2.3
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2001:0:7f00:1::ffff:ffff",  # Teredo, server 127.0.0.1
        "2600:1f00::200:5efe:a9fe:a9fe",  # ISATAP of 169.254.169.254
        "fec0::1",
        "fe80::1%1",
    ],
)
async def test_a_name_answering_an_ipv6_form_of_a_forbidden_ipv4_is_refused(
    fake_dns: FakeDns, answer: str
) -> None:
    fake_dns.answer("hooks.example.com", ["93.184.216.34", answer])
    with pytest.raises(BadInput, match="non-public"):
        await resolve_webhook_url("https://hooks.example.com/hook", ())
    assert fake_dns.lookups["hooks.example.com"] == 1


async def test_approved_addresses_keep_the_resolver_order(fake_dns: FakeDns) -> None:
    fake_dns.answer("hooks.example.com", ["2606:4700::1111", "93.184.216.34", "2606:4700::1111"])
    assert await resolve_webhook_url("https://hooks.example.com/hook", ()) == [
        "2606:4700::1111",
        "93.184.216.34",
    ]
