"""The webhooks tests' shared fixture: the merchant's HTTP server of the endpoint tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.integration.webhooks.endpoint_receiver import Receiver


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    server = Receiver()
    await server.start()
    yield server
    await server.stop()
