# payflow: one image, every role is a `payflow` subcommand (see docker-compose.yml).
FROM python:3.11-slim AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PROJECT_ENVIRONMENT=/opt/venv \
    PATH="/opt/venv/bin:$PATH"

RUN pip install --no-cache-dir uv
WORKDIR /app

# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project

COPY alembic.ini ./
# The service only: the benchmark and chaos harness (lab/, payflow_lab) is a dev-group
# workspace member, neither copied nor installed (--no-dev); `payflow bench` and
# `payflow chaos` say in one line that they need the dev install.
COPY payflow ./payflow
RUN uv sync --frozen --no-dev

RUN useradd --system --uid 10001 payflow
USER payflow

# The default role runs everything in one process; compose runs one role per service.
CMD ["payflow", "up"]
