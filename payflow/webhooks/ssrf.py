"""SSRF guard for merchant-supplied webhook URLs.

`check_webhook_url` is pure (no I/O) and runs when a URL is accepted;
`resolve_webhook_url` also resolves the host and checks every address, and runs
right before a delivery (DNS answers can change between the two). The delivery then
connects only to the addresses it approved (`payflow.webhooks.client`), so a second,
different DNS answer (rebinding) is never used. IPv6 addresses are judged by every
IPv4 address they embed (mapped, compatible, NAT64, 6to4, Teredo, ISATAP).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from payflow.config.webhooks import parse_nat64_prefixes
from payflow.errors import BadInput, RetryableError

MAX_DNS_NAME = 253  # RFC 1035, without the trailing dot
MAX_URL_LENGTH = 2048
ALLOWED_SCHEMES = frozenset({"http", "https"})
# Names that always mean "this machine" or a cloud metadata service.
BLOCKED_NAMES = frozenset({"localhost", "metadata", "metadata.google.internal", "instance-data"})
METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),
        ipaddress.ip_address("169.254.170.2"),
        ipaddress.ip_address("100.100.100.200"),
        ipaddress.ip_address("fd00:ec2::254"),
    }
)

NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)", re.ASCII)
# The characters a host name can hold once IDNA-encoded and lower-cased: letters, digits,
# hyphens and (for names that use them) underscores. urlsplit also passes `%65`, `!`, `*`,
# `$`... in a host (RFC 3986 reg-name): no resolver finds such a name, so a URL naming one
# would be accepted, retried and dead-lettered, never delivered.
HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*", re.ASCII)
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeWebhookUrl(BadInput):
    """The URL is malformed or points at an address payflow must not call."""


class WebhookHostUnresolved(RetryableError):
    """The host's name did not resolve right now (resolver down, SERVFAIL, NXDOMAIN).

    Retryable, like a refused connection: a resolver outage must not dead-letter every
    webhook due in it at their first attempt. Only a refused URL or answer is final."""


def _normalise_allow(allow_hosts: Iterable[str]) -> frozenset[str]:
    return frozenset(host.strip().lower().strip("[]") for host in allow_hosts if host.strip())


# IPv6 forms whose low 32 bits are an IPv4 address that the packet is delivered to:
# the IPv4 address alone decides (a public one passes, e.g. DNS64 answers).
IPV4_TRANSLATION_PREFIXES = (
    ipaddress.IPv6Network("::ffff:0:0/96"),  # IPv4-mapped (RFC 4291)
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64 well-known prefix (RFC 6052)
)
# IPv6 ranges refused whatever they embed (some are missing from older Pythons' tables).
FORBIDDEN_IPV6_NETWORKS = (
    ipaddress.IPv6Network("::/96"),  # IPv4-compatible (deprecated, RFC 4291)
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated (SIIT, RFC 2765)
    ipaddress.IPv6Network("64:ff9b:1::/48"),  # NAT64 local-use prefix (RFC 8215)
    ipaddress.IPv6Network("100::/64"),  # discard-only
    ipaddress.IPv6Network("2001::/23"),  # IETF protocol assignments (incl. Teredo 2001::/32)
    ipaddress.IPv6Network("2001:db8::/32"),  # documentation
    ipaddress.IPv6Network("fc00::/7"),  # unique local
    ipaddress.IPv6Network("fe80::/10"),  # link-local
    ipaddress.IPv6Network("fec0::/10"),  # site-local (deprecated; "global" to Python 3.11)
    ipaddress.IPv6Network("ff00::/8"),  # multicast
)
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
ISATAP_IID = 0x0000_5EFE  # interface id `[02]00:5efe:a.b.c.d` (RFC 5214), u/g bits masked
ISATAP_MASK = 0xFCFF_FFFF


def _low_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)


def nat64_ipv4(address: ipaddress.IPv6Address, prefix_length: int) -> ipaddress.IPv4Address:
    """The IPv4 address embedded after a NAT64 prefix of `prefix_length` bits (RFC 6052:
    bits 64-71, the "u" octet, are skipped)."""
    value = int(address)
    if prefix_length == 96:
        return _low_ipv4(address)
    without_u = ((value >> 64) << 56) | (value & ((1 << 56) - 1))  # 120 bits
    return ipaddress.IPv4Address((without_u >> (120 - prefix_length - 32)) & 0xFFFF_FFFF)


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """Every IPv4 address an IPv6 address carries, by the standard embeddings.

    IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, IPv4-translated
    `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::/48`, Teredo
    `2001:0::/32` (server and de-obfuscated client) and ISATAP `…:[02]00:5efe:a.b.c.d`.
    Returns an empty tuple for an address that embeds none.
    """
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address in IPV4_COMPATIBLE or address in IPV4_TRANSLATED:
        found.append(_low_ipv4(address))
    if address in IPV4_TRANSLATION_PREFIXES[1]:
        found.append(_low_ipv4(address))
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if (int(address) >> 32) & ISATAP_MASK == ISATAP_IID:
        found.append(_low_ipv4(address))
    return tuple(dict.fromkeys(found))


def _forbidden_by_tables(address: IPAddress) -> bool:
    return (
        address in METADATA_ADDRESSES
        or address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


def is_forbidden_address(
    address: IPAddress, nat64_prefixes: Iterable[ipaddress.IPv6Network] = ()
) -> bool:
    """True for loopback, private, link-local, multicast, reserved and metadata addresses,
    and for every IPv6 address that embeds such an IPv4 address (see `embedded_ipv4`; an
    address inside one of the deployment's `nat64_prefixes` is judged by the IPv4 address
    it embeds there, see `nat64_ipv4`).

    Invariant: an address for which this is False reaches, by any standard IPv6
    transition mechanism, only public unicast hosts. A zone id (`%eth0`) means a
    non-global address and is refused.
    """
    if isinstance(address, ipaddress.IPv4Address):
        return _forbidden_by_tables(address)
    if address.scope_id:
        return True
    for prefix in nat64_prefixes:
        if address in prefix:
            return _forbidden_by_tables(nat64_ipv4(address, prefix.prefixlen))
    embedded = embedded_ipv4(address)
    if any(_forbidden_by_tables(inner) for inner in embedded):
        return True
    if any(address in prefix for prefix in IPV4_TRANSLATION_PREFIXES):
        return False  # the embedded public IPv4 address decides
    return any(address in network for network in FORBIDDEN_IPV6_NETWORKS) or (
        _forbidden_by_tables(address)
    )


def _host_of(url: str) -> str:
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeWebhookUrl(f"webhook_url is longer than {MAX_URL_LENGTH} characters")
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in url):
        raise UnsafeWebhookUrl("webhook_url contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port  # raises ValueError on a malformed port
    except ValueError:
        raise UnsafeWebhookUrl("webhook_url is not a valid URL") from None
    if port == 0:
        raise UnsafeWebhookUrl("webhook_url port must be 1-65535")
    if parts.scheme not in ALLOWED_SCHEMES:
        raise UnsafeWebhookUrl("webhook_url must use http or https")
    if parts.username is not None or parts.password is not None:
        raise UnsafeWebhookUrl("webhook_url must not carry credentials")
    if not host:
        raise UnsafeWebhookUrl("webhook_url has no host")
    if not host.isascii():
        # Judge the name the resolver will be asked for: `socket.getaddrinfo` IDNA-encodes
        # (with NFKC), so fullwidth "\uff11\uff12\uff17.\uff10.\uff10.\uff11" is 127.0.0.1.
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise UnsafeWebhookUrl("webhook_url host is not a valid name") from None
    return host.lower().rstrip(".")


def _inet_aton(host: str) -> bytes:
    try:
        return socket.inet_aton(host)
    except OSError:
        raise UnsafeWebhookUrl(f"webhook_url host {host!r} is not valid") from None


def _literal_address(host: str) -> IPAddress | None:
    """The address a host literally names, including the shorthand, octal, hex and
    decimal IPv4 forms resolvers accept ("127.1", "0x7f.1", "2130706433"); else None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]):
        return ipaddress.IPv4Address(_inet_aton(host))
    return None


def check_webhook_url(
    url: str, allow_hosts: Iterable[str], nat64_prefixes: Iterable[str] = ()
) -> str:
    """Validate `url` without any network I/O; return the lower-cased host.

    Invariant: a URL that passes names an http(s) host that is either explicitly in
    `allow_hosts`, or is a DNS name (checked again at send time by
    `resolve_webhook_url`), or is a literal public unicast IP address (IPv6 judged by
    every IPv4 address it embeds, including under the deployment's `nat64_prefixes`).
    Raises `UnsafeWebhookUrl` (a `BadInput`) otherwise.
    """
    host = _host_of(url)
    if host in _normalise_allow(allow_hosts):
        return host
    if host in BLOCKED_NAMES or host.endswith((".localhost", ".internal", ".local")):
        raise UnsafeWebhookUrl(f"webhook_url host {host!r} is not allowed")
    address = _literal_address(host)
    if "[" in urlsplit(url).netloc and not isinstance(address, ipaddress.IPv6Address):
        # `[v1.x]` (an IPvFuture literal) reads as the host `v1.x`: brackets hold an IPv6
        # address, or the URL names nothing payflow can connect to.
        raise UnsafeWebhookUrl("webhook_url brackets must hold an IPv6 address")
    if address is None:
        if not HOST_NAME.fullmatch(host):
            raise UnsafeWebhookUrl(
                f"webhook_url host {host!r} is not a valid name: letters, digits, '-', '_'"
                " and dots only"
            )
        if "." not in host:
            raise UnsafeWebhookUrl(f"webhook_url host {host!r} is not a public name")
        try:
            # What the resolver does first at send time (an empty label, one over 63
            # characters, a name over 253): refused now, not accepted and dead-lettered.
            if len(host.encode("idna")) > MAX_DNS_NAME:
                raise UnicodeError(f"longer than {MAX_DNS_NAME} characters")
        except UnicodeError as error:
            raise UnsafeWebhookUrl(
                f"webhook_url host {host!r} is not a valid name: {error}"
            ) from None
        return host
    if is_forbidden_address(address, parse_nat64_prefixes(nat64_prefixes)):
        raise UnsafeWebhookUrl(f"webhook_url address {host} is not a public address")
    written = (urlsplit(url).hostname or "").lower()
    if address.version == 4 and written != str(address):
        # Decimal, octal, hex, shorthand or trailing-dot spellings of a public address:
        # judged above like the address, but the webhook client connects to an IP-literal
        # URL only in its canonical form, so such a URL could never be delivered.
        raise UnsafeWebhookUrl(
            f"webhook_url host {written!r} is not a canonical IPv4 address; write {address}"
        )
    return host


async def resolve_webhook_url(
    url: str, allow_hosts: Iterable[str], nat64_prefixes: Iterable[str] = ()
) -> list[str]:
    """Check `url` and every address its host resolves to; return those addresses.

    Returns the addresses in the resolver's order (its RFC 6724 preference), without
    duplicates; scoped IPv6 answers keep their zone (`fe80::1%eth0`).
    Invariant: unless the host is allow-listed, no returned address is forbidden by
    `is_forbidden_address`. The caller connects ONLY to the returned addresses
    (`payflow.webhooks.client`): a second lookup could answer differently (DNS
    rebinding). `nat64_prefixes` are the deployment's own NAT64 prefixes (DNS64 answers
    under them are judged by the IPv4 address they embed). Raises `UnsafeWebhookUrl` when
    the URL, the name or any answer is refused, and `WebhookHostUnresolved` (retryable)
    when the name has no answer now.
    """
    allowed = _normalise_allow(allow_hosts)
    prefixes = tuple(nat64_prefixes)
    nat64 = parse_nat64_prefixes(prefixes)
    host = check_webhook_url(url, allowed, prefixes)
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError as error:
        raise UnsafeWebhookUrl(f"webhook_url host {host!r} is not a valid name: {error}") from None
    except OSError as error:
        detail = f"webhook_url host {host!r} does not resolve: {error}"
        raise WebhookHostUnresolved(detail) from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise WebhookHostUnresolved(f"webhook_url host {host!r} does not resolve")
    if host in allowed:
        return addresses
    for text in addresses:
        if is_forbidden_address(ipaddress.ip_address(text), nat64):
            raise UnsafeWebhookUrl(f"webhook_url host {host!r} resolves to a non-public address")
    return addresses
