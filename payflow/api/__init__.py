"""The HTTP API, in the composition root: routers per domain, one exception handler,
API-key auth. `payflow.app.create_app` serves it with the console mounted."""

__all__: list[str] = []
