"""Ingress fixtures: the API app per test and its clients (the API's own fixtures), since
provider deliveries arrive over the API's webhook endpoint."""

from tests.integration.api.conftest import (  # noqa: F401 - fixtures by name
    admin,
    anon,
    api_settings,
    app,
    client,
    other,
    redis_cleanup,
    redis_prefix,
)
