"""Every boolean query parameter of the API takes `true` or `false` only: pydantic's lax
`bool` read "yes", "on", "1", "off" and "0" as booleans, so a mistyped flag silently
meant something. Walks every GET operation /openapi.json lists (routes added later
too)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

LAX = ["yes", "on", "1", "no", "off", "0", "True", "FALSE", "t", " true", ""]


def _boolean_parameters(document: dict[str, Any]) -> list[tuple[str, str]]:
    """(path with its path parameters filled, parameter name) of each GET boolean."""
    found = []
    for path, operations in document["paths"].items():
        operation = operations.get("get")
        if operation is None:
            continue
        params = operation.get("parameters", [])
        filled = path
        for param in params:
            if param["in"] == "path":
                value = "1" if param["schema"].get("type") == "integer" else str(uuid.uuid4())
                filled = filled.replace("{" + param["name"] + "}", value)
        for param in params:
            schema = param.get("schema", {})
            kinds = [schema.get("type")] + [s.get("type") for s in schema.get("anyOf", [])]
            if "boolean" in kinds and param["in"] == "query":
                found.append((filled, param["name"]))
    return found


async def test_a_boolean_parameter_is_true_or_false_only(admin: httpx.AsyncClient) -> None:
    document = (await admin.get("/openapi.json")).json()
    found = _boolean_parameters(document)
    assert ("/api/v1/admin/dlq", "include_resolved") in found, found
    for path, name in found:
        for value in LAX:
            answer = await admin.get(path, params={name: value})
            assert answer.status_code == 422, (path, name, value, answer.text)
            assert answer.json()["errors"][0]["field"] == f"query.{name}", answer.text
            assert "true or false" in answer.json()["errors"][0]["message"], answer.text


async def test_true_and_false_still_work(admin: httpx.AsyncClient) -> None:
    for value in ("true", "false"):
        answer = await admin.get("/api/v1/admin/dlq", params={"include_resolved": value})
        assert answer.status_code == 200, answer.text
