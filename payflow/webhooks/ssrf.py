"""SSRF guard for merchant webhook URLs, applied at registration and again at send time.

A URL must be http(s) with a host. Unless its host is explicitly allowed, every address
it resolves to must be globally routable: loopback, private, link-local (cloud metadata),
multicast, reserved and unspecified addresses are refused.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from payflow.errors import BadInput

ALLOWED_SCHEMES = frozenset({"http", "https"})


def _host(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ALLOWED_SCHEMES:
        raise BadInput("webhook URL must use http or https")
    if not parts.hostname:
        raise BadInput("webhook URL has no host")
    if parts.username or parts.password:
        raise BadInput("webhook URL must not carry credentials")
    return parts.hostname.lower()


def _check_address(address: str) -> None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if not ip.is_global or ip.is_multicast:
        raise BadInput(f"webhook URL resolves to a non-public address ({ip})")


def check_webhook_url(url: str, allow_hosts: tuple[str, ...]) -> None:
    """Refuse a URL whose form is unsafe; an IP literal must be public unless allowed.

    Invariant: returns only for http(s) URLs with a host that is either in
    `allow_hosts` or not a non-public IP literal. Names are checked by `resolve_and_check`.
    """
    host = _host(url)
    if host in allow_hosts:
        return
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return  # a name: checked after resolution
    _check_address(host)


async def resolve_and_check(url: str, allow_hosts: tuple[str, ...]) -> None:
    """`check_webhook_url`, then resolve the host now and refuse non-public addresses.

    Called right before each send, because DNS answers can change after registration.
    """
    check_webhook_url(url, allow_hosts)
    host = _host(url)
    if host in allow_hosts:
        return
    port = urlsplit(url).port or 443
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise BadInput(f"webhook host {host!r} does not resolve: {exc}") from None
    for info in infos:
        _check_address(str(info[4][0]))
