"""Every boolean of a request body (a `Strict` model) takes JSON `true`/`false` only:
pydantic's lax `bool` would read "yes", "off", 0 or 1, so a typo'd or mistyped flag
would silently mean something. Walks every `Strict` model of the app's routes, so a body
added later is held to it too."""

from __future__ import annotations

import importlib
import pkgutil
import types
import typing
from typing import Annotated, Any

import pytest
from pydantic import TypeAdapter, ValidationError

import payflow.api.routes
from payflow.api.schemas import Strict


def _strict_models() -> list[type[Strict]]:
    for module in pkgutil.iter_modules(payflow.api.routes.__path__):
        importlib.import_module(f"payflow.api.routes.{module.name}")
    found: list[type[Strict]] = []
    pending = list(Strict.__subclasses__())
    while pending:
        model = pending.pop()
        found.append(model)
        pending.extend(model.__subclasses__())
    return found


def _holds_bool(annotation: Any) -> bool:
    if annotation is bool:
        return True
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, Annotated):
        return any(_holds_bool(arg) for arg in args)
    return False


BOOL_FIELDS = [
    (model, name, field)
    for model in _strict_models()
    for name, field in model.model_fields.items()
    if _holds_bool(field.annotation)
]


def test_the_walk_finds_the_webhook_endpoint_flags() -> None:
    names = {(model.__name__, name) for model, name, _ in BOOL_FIELDS}
    assert {("EndpointCreate", "enabled"), ("EndpointPatch", "enabled")} <= names


@pytest.mark.parametrize(
    ("model", "name", "field"), BOOL_FIELDS, ids=[f"{m.__name__}.{n}" for m, n, _ in BOOL_FIELDS]
)
@pytest.mark.parametrize("value", ["true", "yes", "off", "0", 0, 1, 1.0])
def test_a_body_boolean_refuses_what_is_not_a_json_boolean(
    model: type[Strict], name: str, field: Any, value: object
) -> None:
    annotation = field.annotation
    if field.metadata:
        annotation = Annotated[annotation, *field.metadata]
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    assert adapter.validate_python(True) is True
    with pytest.raises(ValidationError):
        adapter.validate_python(value)
