"""The SSRF guard for webhook URLs."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from payflow.errors import BadInput, RetryableError
from payflow.webhooks.ssrf import (
    UnsafeWebhookUrl,
    WebhookHostUnresolved,
    check_webhook_url,
    embedded_ipv4,
    is_forbidden_address,
    resolve_webhook_url,
)

REFUSED = [
    "http://127.0.0.1/hook",
    "http://127.1/hook",
    "http://2130706433/hook",
    "http://0x7f.1/hook",
    "http://0177.0.0.1/hook",
    "http://1.2.3.999/hook",
    "http://localhost:8080/hook",
    "http://foo.localhost/hook",
    "http://10.1.2.3/x",
    "http://172.16.0.1/x",
    "http://192.168.1.1/x",
    "http://169.254.169.254/latest/meta-data",
    "http://metadata.google.internal/computeMetadata",
    "http://100.100.100.200/x",
    "http://[::1]/x",
    "http://[fe80::1]/x",
    "http://[::ffff:127.0.0.1]/x",
    "http://[fd00:ec2::254]/x",
    "http://224.0.0.1/x",
    "http://0.0.0.0/x",
    "http://intranet/x",
    "ftp://example.com/x",
    "file:///etc/passwd",
    "http://user:pw@example.com/x",
    "http://example.com:99999/x",
    "http:///x",
    "http://exa mple.com/x",
]


@pytest.mark.parametrize("url", REFUSED)
def test_refused(url: str) -> None:
    with pytest.raises(UnsafeWebhookUrl):
        check_webhook_url(url, ())


@pytest.mark.parametrize(
    "url",
    ["https://example.com/hook", "http://93.184.216.34/x", "https://hooks.example.org:8443/a?b=c"],
)
def test_public_urls_pass(url: str) -> None:
    check_webhook_url(url, ())


def test_allow_list_admits_named_hosts_only() -> None:
    assert check_webhook_url("http://127.0.0.1:9000/hook", ["127.0.0.1"]) == "127.0.0.1"
    assert check_webhook_url("http://LOCALHOST/hook", ["localhost"]) == "localhost"
    with pytest.raises(UnsafeWebhookUrl):
        check_webhook_url("http://127.0.0.2/hook", ["127.0.0.1"])


async def test_resolving_variant_checks_every_address() -> None:
    with pytest.raises(UnsafeWebhookUrl):
        await resolve_webhook_url("http://localhost.:80/x", ())
    assert await resolve_webhook_url("http://127.0.0.1:9/x", ["127.0.0.1"]) == ["127.0.0.1"]
    # A name without an answer is retryable (a resolver outage), never a final refusal.
    with pytest.raises(WebhookHostUnresolved) as unresolved:
        await resolve_webhook_url("http://does-not-exist.invalid/x", ())
    assert isinstance(unresolved.value, RetryableError)
    assert not isinstance(unresolved.value, BadInput)


# --- IPv6 forms that embed an IPv4 address --------------------------------------------

FORBIDDEN_IPV4 = ("127.0.0.1", "10.1.2.3", "169.254.169.254")
PUBLIC_IPV4 = "8.8.8.8"


def _hex(v4: str) -> str:
    """`a.b.c.d` as the two IPv6 hextets `abcd:efgh`."""
    value = int(ipaddress.IPv4Address(v4))
    return f"{value >> 16:x}:{value & 0xFFFF:x}"


def _teredo_client(v4: str) -> str:
    """Teredo stores the client address bit-inverted in the last 32 bits."""
    value = int(ipaddress.IPv4Address(v4)) ^ 0xFFFF_FFFF
    return f"{value >> 16:x}:{value & 0xFFFF:x}"


# form name -> IPv6 text carrying the IPv4 address
EMBEDDINGS: dict[str, Callable[[str], str]] = {
    "ipv4-mapped": lambda v4: f"::ffff:{v4}",
    "ipv4-compatible": lambda v4: f"::{v4}",
    "ipv4-translated": lambda v4: f"::ffff:0:{v4}",
    "nat64": lambda v4: f"64:ff9b::{v4}",
    "6to4": lambda v4: f"2002:{_hex(v4)}::1",
    "teredo-server": lambda v4: f"2001:0:{_hex(v4)}:0:0:{_teredo_client(PUBLIC_IPV4)}",
    "teredo-client": lambda v4: f"2001:0:{_hex(PUBLIC_IPV4)}:0:0:{_teredo_client(v4)}",
    "isatap": lambda v4: f"2600:1f00::5efe:{v4}",
    "isatap-global": lambda v4: f"2600:1f00::200:5efe:{v4}",
}
# Forms that a public IPv4 address may legitimately arrive in (DNS64, 6to4, ISATAP).
PUBLIC_WHEN_INNER_IS = ("ipv4-mapped", "nat64", "6to4", "isatap-global")


@pytest.mark.parametrize("form", sorted(EMBEDDINGS))
@pytest.mark.parametrize("v4", FORBIDDEN_IPV4)
def test_ipv6_embedding_a_forbidden_ipv4_is_refused_at_accept_time(form: str, v4: str) -> None:
    literal = EMBEDDINGS[form](v4)
    assert ipaddress.IPv4Address(v4) in embedded_ipv4(ipaddress.IPv6Address(literal))
    with pytest.raises(UnsafeWebhookUrl, match="not a public address"):
        check_webhook_url(f"http://[{literal}]:8080/hook", ())


@pytest.mark.parametrize("form", sorted(EMBEDDINGS))
def test_every_embedding_is_decoded(form: str) -> None:
    literal = ipaddress.IPv6Address(EMBEDDINGS[form](PUBLIC_IPV4))
    assert ipaddress.IPv4Address(PUBLIC_IPV4) in embedded_ipv4(literal)


@pytest.mark.parametrize("form", PUBLIC_WHEN_INNER_IS)
def test_ipv6_embedding_a_public_ipv4_passes(form: str) -> None:
    literal = EMBEDDINGS[form](PUBLIC_IPV4)
    assert check_webhook_url(f"https://[{literal}]/hook", ()) == literal


@pytest.mark.parametrize(
    "literal",
    [
        "64:ff9b:1::808:808",  # NAT64 local-use prefix: the embedding is site-defined
        "64:ff9b:1:7f00:1::",
        "fec0::1",  # site-local: "global" to Python 3.11's tables
        "fe80::1%25eth0",  # any zone id
        "100::1",
        "2001:db8::1",
        "fd12:3456::1",
    ],
)
def test_non_global_ipv6_ranges_are_refused(literal: str) -> None:
    with pytest.raises(UnsafeWebhookUrl):
        check_webhook_url(f"http://[{literal}]/hook", ())


@given(
    inner=st.one_of(
        st.ip_addresses(network="127.0.0.0/8"),
        st.ip_addresses(network="10.0.0.0/8"),
        st.ip_addresses(network="172.16.0.0/12"),
        st.ip_addresses(network="192.168.0.0/16"),
        st.ip_addresses(network="169.254.0.0/16"),
        st.ip_addresses(network="100.64.0.0/10"),
        st.ip_addresses(network="0.0.0.0/8"),
    ),
    form=st.sampled_from(sorted(EMBEDDINGS)),
)
def test_property_no_embedding_of_a_forbidden_ipv4_passes(
    inner: ipaddress.IPv4Address, form: str
) -> None:
    address = ipaddress.IPv6Address(EMBEDDINGS[form](str(inner)))
    assert inner in embedded_ipv4(address)
    assert is_forbidden_address(address)


def test_a_configured_nat64_prefix_is_judged_at_accept_time() -> None:
    literal = "2600:1f00::a01:203"  # 10.1.2.3 under the /96 prefix 2600:1f00::/96
    assert check_webhook_url(f"http://[{literal}]/hook", ()) == literal
    with pytest.raises(UnsafeWebhookUrl, match="not a public address"):
        check_webhook_url(f"http://[{literal}]/hook", (), ("2600:1f00::/96",))
