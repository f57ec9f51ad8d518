"""One rule for every free-text field a merchant names (a webhook endpoint's description,
an API key's name, a payment's description): C0 and C1 control characters and the bidi
overrides and isolates (U+202A to U+202E, U+2066 to U+2069) are refused, in the request
models (422) and in the domain checks the console and the stores call (`BadInput`); a
description may hold tabs and line breaks, a name may not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from payflow.api.keys import checked_name
from payflow.api.routes.api_keys import ApiKeyCreate
from payflow.api.routes.webhook_endpoints import EndpointCreate, EndpointPatch
from payflow.api.schemas import PaymentCreate
from payflow.errors import BadInput
from payflow.text import unsafe_text_reason
from payflow.webhooks.endpoints.store import checked_description

BAD = [
    "a\x01b",
    "a\x1bb",
    "a\x7fb",
    "a\x85b",
    "a\x9fb",
    *(f"invoice{chr(c)}gnp.exe" for c in range(0x202A, 0x202F)),
    *(f"a{chr(c)}b" for c in range(0x2066, 0x206A)),
]
GOOD = ["order 42", "café — ☕ 東京", "עברית and English"]
LINES = ["two\nlines", "a\tb", "a\r\nb"]  # a description's, never a name's

FIELDS: list[tuple[type[BaseModel], str, dict[str, Any]]] = [
    (PaymentCreate, "description", {"amount": "1.00", "currency": "USD"}),
    (EndpointCreate, "description", {"url": "https://example.com/h"}),
    (EndpointPatch, "description", {}),
    (ApiKeyCreate, "name", {"scope": "read"}),
]
CHECKS: list[Callable[[str], str]] = [checked_description, checked_name]
DESCRIPTIONS = [f for f in FIELDS if f[1] == "description"]


@pytest.mark.parametrize(
    ("model", "name", "rest"), FIELDS, ids=[f"{m.__name__}.{n}" for m, n, _ in FIELDS]
)
@pytest.mark.parametrize("value", BAD, ids=[f"U+{ord(v[1]):04X}" for v in BAD])
def test_a_free_text_field_refuses_controls_and_bidi(
    model: type[BaseModel], name: str, rest: dict[str, Any], value: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate({**rest, name: value})
    assert [error["loc"] for error in caught.value.errors()] == [(name,)]


@pytest.mark.parametrize(
    ("model", "name", "rest"), FIELDS, ids=[f"{m.__name__}.{n}" for m, n, _ in FIELDS]
)
@pytest.mark.parametrize("value", GOOD)
def test_a_free_text_field_takes_readable_text(
    model: type[BaseModel], name: str, rest: dict[str, Any], value: str
) -> None:
    assert getattr(model.model_validate({**rest, name: value}), name) == value


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("value", BAD, ids=[f"U+{ord(v[1]):04X}" for v in BAD])
def test_the_domain_checks_refuse_the_same(check: Callable[[str], str], value: str) -> None:
    with pytest.raises(BadInput, match="control characters"):
        check(value)


def test_the_reason_names_the_character() -> None:
    reason = unsafe_text_reason("a\u202eb")
    assert reason is not None and "U+202E" in reason
    assert unsafe_text_reason("plain") is None


@pytest.mark.parametrize(
    ("model", "name", "rest"), DESCRIPTIONS, ids=[f"{m.__name__}.{n}" for m, n, _ in DESCRIPTIONS]
)
@pytest.mark.parametrize("value", LINES)
def test_a_description_may_run_over_lines(
    model: type[BaseModel], name: str, rest: dict[str, Any], value: str
) -> None:
    assert getattr(model.model_validate({**rest, name: value}), name) == value
    assert checked_description(value) == value


@pytest.mark.parametrize("value", LINES)
def test_a_key_name_is_one_line(value: str) -> None:
    with pytest.raises(ValidationError):
        ApiKeyCreate.model_validate({"scope": "read", "name": value})
    with pytest.raises(BadInput, match="line breaks and tabs included"):
        checked_name(value)
