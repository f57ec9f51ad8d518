"""FastAPI app: routers per domain, one exception handler, API-key auth."""
