"""The send-time SSRF guard: names are resolved right before each delivery."""

from __future__ import annotations

import pytest

from payflow.errors import BadInput
from payflow.webhooks.ssrf import resolve_webhook_url


async def test_a_name_resolving_to_loopback_is_refused_at_send_time() -> None:
    with pytest.raises(BadInput):
        await resolve_webhook_url("http://localhost:8080/hook", ())
    assert "127.0.0.1" in await resolve_webhook_url("http://localhost:8080/hook", ("localhost",))


async def test_an_allowed_ip_literal_passes_at_send_time() -> None:
    assert await resolve_webhook_url("http://127.0.0.1:9000/hook", ("127.0.0.1",)) == ["127.0.0.1"]
