"""The send-time SSRF guard: names are resolved right before each delivery, and every
answer is judged, including the IPv4 address an IPv6 answer embeds."""

from __future__ import annotations

import ipaddress

import pytest

from payflow.errors import BadInput
from payflow.webhooks.ssrf import check_webhook_url, nat64_ipv4, resolve_webhook_url
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


# RFC 6052 section 2.4: 192.0.2.33 under 2001:db8:122:344::/L for every allowed length.
RFC6052_EXAMPLES = [
    ("2001:db8::/32", "2001:db8:c000:221::"),
    ("2001:db8:100::/40", "2001:db8:1c0:2:21::"),
    ("2001:db8:122::/48", "2001:db8:122:c000:2:2100::"),
    ("2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"),
    ("2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"),
    ("2001:db8:122:344::/96", "2001:db8:122:344::192.0.2.33"),
]


@pytest.mark.parametrize(("prefix", "address"), RFC6052_EXAMPLES)
def test_nat64_embedding_follows_rfc_6052(prefix: str, address: str) -> None:
    length = ipaddress.IPv6Network(prefix).prefixlen
    assert nat64_ipv4(ipaddress.IPv6Address(address), length) == ipaddress.IPv4Address("192.0.2.33")


def _under_nat64(prefix: ipaddress.IPv6Network, v4: str) -> str:
    """`v4` embedded under `prefix` (RFC 6052: the u octet, bits 64-71, stays zero)."""
    length, value = prefix.prefixlen, int(ipaddress.IPv4Address(v4))
    if length == 96:
        return str(prefix.network_address + value)
    placed = value << (120 - length - 32)
    spread = ((placed >> 56) << 64) | (placed & ((1 << 56) - 1))
    return str(ipaddress.IPv6Address(int(prefix.network_address) | spread))


@pytest.mark.parametrize("length", [32, 40, 48, 56, 64, 96])
@pytest.mark.parametrize("v4", ["127.0.0.1", "10.1.2.3", "169.254.169.254"])
async def test_a_deployments_own_nat64_prefix_is_judged_by_the_embedded_ipv4(
    fake_dns: FakeDns, length: int, v4: str
) -> None:
    prefix = ipaddress.IPv6Network(f"2600:1f00::/{length}")  # global unicast space
    fake_dns.answer("hooks.example.com", [_under_nat64(prefix, v4)])
    # Without the prefix configured the address is plain global IPv6 and passes ...
    assert await resolve_webhook_url("https://hooks.example.com/hook", ())
    # ... with it, the embedded IPv4 address decides.
    with pytest.raises(BadInput, match="non-public"):
        await resolve_webhook_url("https://hooks.example.com/hook", (), (str(prefix),))
    fake_dns.answer("hooks.example.com", [_under_nat64(prefix, "8.8.8.8")])
    assert await resolve_webhook_url("https://hooks.example.com/hook", (), (str(prefix),))


@pytest.mark.parametrize(
    "url",
    [
        "http://.com/",  # an empty label
        "http://a..b.com/",
        "http://" + "a" * 64 + ".com/",  # a label over 63 characters
        "https://" + ("a" * 63 + ".") * 4 + "com/",  # a name over 253 characters
        "http://example.com:0/",  # no one listens on port 0
        # Characters urlsplit passes in a host but no resolver finds (RFC 3986 reg-name):
        "https://ex%2e.com/",
        "https://%65xample.com/",
        "http://127.0.0.1%2e/",
        "https://a!b.example.com/",
        "https://a*.example.com/",
        "https://a$b.example.com/",
        "https://a'b.example.com/",
        "https://a(b).example.com/",
        "https://a,b.example.com/",
        "https://a;b.example.com/",
        "https://a=b.example.com/",
        "https://a+b.example.com/",
        "https://a~b.example.com/",
        # Brackets that do not hold an IPv6 address (an IPvFuture literal reads as `v1.x`):
        "https://[v1.x]/",
        "https://[v1.example.com]/",
    ],
)
def test_a_url_the_sender_could_never_reach_is_refused_when_the_payment_is_made(url: str) -> None:
    # Each is refused when the payment is made, not accepted (202) and dead-lettered at send time
    # ("is not a valid name: encoding with 'idna' codec failed").
    with pytest.raises(BadInput):
        check_webhook_url(url, ())


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "https://a.b.c.example.com:8443/x",
        "http://例え.jp/",
        "https://my_service.example.com/",
        "https://a-b.example.com/%2e?q=%00x#f",  # percent signs outside the host are fine
        "https://[2606:4700:4700::1111]:8443/",
        "https://example.com./",
    ],
)
def test_valid_names_still_pass(url: str) -> None:
    check_webhook_url(url, ())
