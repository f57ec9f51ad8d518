"""Schemathesis against /openapi.json of the API running as in production: no 5xx,
and every response matches the documented status codes, content types and schemas."""

from __future__ import annotations

import collections
import os

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import ADMIN_KEY

EXAMPLES = int(os.environ.get("PAYFLOW_FUZZ_EXAMPLES", "30"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


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
