"""SSRF guard for merchant-supplied webhook URLs.

`check_webhook_url` is pure (no I/O) and runs when a URL is accepted;
`resolve_webhook_url` also resolves the host and checks every address, and runs
right before a delivery (DNS answers can change between the two).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from payflow.errors import BadInput

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
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeWebhookUrl(BadInput):
    """The URL is malformed or points at an address payflow must not call."""


def _normalise_allow(allow_hosts: Iterable[str]) -> frozenset[str]:
    return frozenset(host.strip().lower().strip("[]") for host in allow_hosts if host.strip())


def is_forbidden_address(address: IPAddress) -> bool:
    """True for loopback, private, link-local, multicast, reserved and metadata addresses."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
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


def _host_of(url: str) -> str:
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeWebhookUrl(f"webhook_url is longer than {MAX_URL_LENGTH} characters")
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in url):
        raise UnsafeWebhookUrl("webhook_url contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise UnsafeWebhookUrl("webhook_url is not a valid URL") from None
    if parts.scheme not in ALLOWED_SCHEMES:
        raise UnsafeWebhookUrl("webhook_url must use http or https")
    if parts.username is not None or parts.password is not None:
        raise UnsafeWebhookUrl("webhook_url must not carry credentials")
    if not host:
        raise UnsafeWebhookUrl("webhook_url has no host")
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


def check_webhook_url(url: str, allow_hosts: Iterable[str]) -> str:
    """Validate `url` without any network I/O; return the lower-cased host.

    Invariant: a URL that passes names an http(s) host that is either explicitly in
    `allow_hosts`, or is a DNS name (checked again at send time by
    `resolve_webhook_url`), or is a literal public unicast IP address.
    Raises `UnsafeWebhookUrl` (a `BadInput`) otherwise.
    """
    host = _host_of(url)
    if host in _normalise_allow(allow_hosts):
        return host
    if host in BLOCKED_NAMES or host.endswith((".localhost", ".internal", ".local")):
        raise UnsafeWebhookUrl(f"webhook_url host {host!r} is not allowed")
    address = _literal_address(host)
    if address is None:
        if "." not in host:
            raise UnsafeWebhookUrl(f"webhook_url host {host!r} is not a public name")
        return host
    if is_forbidden_address(address):
        raise UnsafeWebhookUrl(f"webhook_url address {host} is not a public address")
    return host


async def resolve_webhook_url(url: str, allow_hosts: Iterable[str]) -> list[str]:
    """Check `url` and every address its host resolves to; return those addresses.

    Invariant: unless the host is allow-listed, no returned address is loopback,
    private, link-local, multicast, reserved or a metadata address; the caller should
    connect to one of the returned addresses to avoid a second, different lookup.
    """
    allowed = _normalise_allow(allow_hosts)
    host = check_webhook_url(url, allowed)
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise UnsafeWebhookUrl(f"webhook_url host {host!r} does not resolve: {error}") from None
    addresses = sorted({str(info[4][0]) for info in infos})
    if host in allowed:
        return addresses
    for text in addresses:
        if is_forbidden_address(ipaddress.ip_address(text.split("%", 1)[0])):
            raise UnsafeWebhookUrl(f"webhook_url host {host!r} resolves to a non-public address")
    return addresses
