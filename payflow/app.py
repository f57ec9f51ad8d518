"""The application factory uvicorn serves: the HTTP API with the web console mounted.

Part of the composition root: the API (`payflow.api.app.create_api`) knows nothing of
the console; this wires the console onto it when `CONSOLE_ENABLED`.
"""

from __future__ import annotations

from fastapi import FastAPI

from payflow.api.app import create_api
from payflow.config import Settings, load_settings
from payflow.console import install_console


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the served app: `create_api(settings)` plus /console when enabled.

    Invariant (as `create_api`): opens no connection; a missing or short provider secret
    fails here, before serving anything.
    """
    settings = settings or load_settings()
    app = create_api(settings)
    if settings.console_enabled:
        install_console(app)  # server-rendered /console
    return app
