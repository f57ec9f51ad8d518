"""The SSRF guard for webhook URLs."""

from __future__ import annotations

import pytest

from payflow.webhooks.ssrf import UnsafeWebhookUrl, check_webhook_url, resolve_webhook_url

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
    with pytest.raises(UnsafeWebhookUrl):
        await resolve_webhook_url("http://does-not-exist.invalid/x", ())
