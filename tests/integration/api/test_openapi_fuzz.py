"""Schemathesis against /openapi.json of the API running as in production: no 5xx,
and every response matches the documented status codes, content types and schemas."""

from __future__ import annotations

import asyncio
import collections
import os
import uuid
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from payflow.config import load_settings
from tests.conftest import RUN_ID, _admin_execute, app_url, clone_database

from .conftest import ADMIN_KEY, API_KEY, PROVIDER_SECRET
from .server import running_api

EXAMPLES = int(os.environ.get("PAYFLOW_FUZZ_EXAMPLES", "30"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def live_api(template_database: str) -> Iterator[str]:
    """One API subprocess and database for the whole fuzz module."""
    name = f"payflow_test_{RUN_ID}_fuzz_{uuid.uuid4().hex[:6]}"
    asyncio.run(clone_database(template_database, name))
    settings = load_settings(
        database_url=app_url(name),
        api_key=API_KEY,
        admin_api_key=ADMIN_KEY,
        provider_webhook_secret=PROVIDER_SECRET,
        webhook_allow_hosts=("127.0.0.1",),
        redis_key_prefix=f"payflow-test:{uuid.uuid4().hex[:12]}:",
        rate_limit_per_minute=1_000_000,
    )
    try:
        with running_api(settings, workers=1) as base:
            yield base
    finally:
        asyncio.run(_admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_api_conforms_to_its_openapi_document(live_api: str) -> None:
    schema = schemathesis.openapi.from_url(f"{live_api}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    statuses: list[int] = []
    cases = [
        (operation, mode)
        for operation in operations
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    ]
    for operation, mode in cases:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def run(case: schemathesis.Case) -> None:
            response = case.call_and_validate(headers={"X-API-Key": ADMIN_KEY}, checks=CHECKS)
            statuses.append(response.status_code)

        run()
    # The run really exercised the API, and reached success paths as well as refusals.
    assert len(statuses) >= 5 * len(cases)
    assert any(200 <= status < 300 for status in statuses)
    assert all(status < 500 for status in statuses)
    print(sorted(collections.Counter(statuses).items()))
