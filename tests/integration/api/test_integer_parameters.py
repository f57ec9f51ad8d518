"""Every integer query or path parameter of the API is plain decimal digits: pydantic's
lax `int` read `limit=5_0` as 50, `5.0`, ` 5` and `+5` as 5, and Arabic-Indic or
fullwidth digits as numbers. Each is a 422 naming the parameter now, on every route the
OpenAPI document lists (routes added later too); plain digits still work."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

LAX = ["5_0", "5.0", " 5", "+5", "\u0665", "\uff15", "5 ", "0x5"]


def _integer_parameters(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(path with its parameters filled, parameter name, where) of each GET integer."""
    found = []
    for path, operations in document["paths"].items():
        operation = operations.get("get")
        if operation is None:
            continue
        params = operation.get("parameters", [])
        filled = path
        for param in params:
            if param["in"] == "path":
                schema = param["schema"]
                value = "1" if schema.get("type") == "integer" else str(uuid.uuid4())
                filled = filled.replace("{" + param["name"] + "}", value)
        for param in params:
            schema = param.get("schema", {})
            kinds = [schema.get("type")] + [s.get("type") for s in schema.get("anyOf", [])]
            if "integer" in kinds and param["in"] in ("query", "path"):
                found.append(
                    (path if param["in"] == "path" else filled, param["name"], param["in"])
                )
    return found


async def test_an_integer_parameter_is_decimal_digits_only(admin: httpx.AsyncClient) -> None:
    document = (await admin.get("/openapi.json")).json()
    found = _integer_parameters(document)
    names = {(path, name) for path, name, _ in found}
    assert ("/api/v1/events", "limit") in names
    assert ("/api/v1/admin/dlq/{dlq_id}", "dlq_id") in names
    assert len(found) >= 8, found
    for path, name, where in found:
        for value in LAX:
            if where == "query":
                answer = await admin.get(path, params={name: value})
            else:
                answer = await admin.get(path.replace("{" + name + "}", value))
            assert answer.status_code == 422, (path, name, value, answer.text)
            assert answer.json()["errors"][0]["field"] == f"{where}.{name}", answer.text


@pytest.mark.parametrize("value", ["5", "05", "100"])
async def test_plain_digits_still_work(client: httpx.AsyncClient, value: str) -> None:
    answer = await client.get("/api/v1/events", params={"limit": value})
    assert answer.status_code == 200, answer.text


async def test_a_negative_limit_keeps_its_range_message(client: httpx.AsyncClient) -> None:
    answer = await client.get("/api/v1/events", params={"limit": "-1"})
    assert answer.status_code == 422
    assert "greater than or equal to 1" in answer.json()["errors"][0]["message"]
