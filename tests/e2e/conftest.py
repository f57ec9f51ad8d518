"""End-to-end tests share the pipeline fixtures (vhost, sink, running roles)."""

from tests.integration.conftest import (  # noqa: F401 - fixtures by name
    merchant,
    pipe_settings,
    sink,
    start_roles,
    submitter,
    vhost,
)
