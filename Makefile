# payflow: `make run` runs the service, `make test` runs the whole suite (as CI does);
# `make test-fast` skips the tests marked slow, `make test-unit` needs no services.
SHELL := /bin/bash
UV := $(shell command -v uv 2>/dev/null || echo "$(HOME)/.local/bin/uv")

# Local-only defaults so `make run` works out of the box; real deployments set their own.
run: export API_KEY ?= local-dev-api-key-change-me
run: export ADMIN_API_KEY ?= local-dev-admin-key-change-me
run: export PROVIDER_WEBHOOK_SECRET ?= local-dev-provider-secret-0123456789abcdef
run: export WEBHOOK_ALLOW_HOSTS ?= 127.0.0.1,localhost
bench: export API_KEY ?= local-dev-api-key-change-me
bench: export PROVIDER_WEBHOOK_SECRET ?= local-dev-provider-secret-0123456789abcdef

.PHONY: install promtool run test test-fast test-unit lint bench schema
install:
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv
	@uv sync --frozen --quiet

# promtool (Debian's `prometheus` package) checks and unit-tests deploy/prometheus/rules.yml.
promtool:
	@command -v promtool >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 \
		|| { $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; }; }

run: install
	uv run payflow migrate
	uv run payflow up

# Three pytest workers, one test file each at a time (module fixtures stay on one worker):
# most tests wait on PostgreSQL, RabbitMQ or a subprocess, so two cores keep three busy.
TEST_WORKERS ?= 3
test: install promtool anvil chromium
	uv run pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The loop before a push: the same suite without the tests marked slow (SLOW_TESTS in
# tests/conftest.py names them, each with its reason). Needs the services, like `make test`.
test-fast: install promtool anvil chromium pgbouncer
	uv run pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow"

# tests/unit alone: pure code and payflow's own subprocesses; no PostgreSQL, RabbitMQ,
# Redis, anvil or browser needed (docs/testing.md says how that is checked).
test-unit: install
	uv run pytest -n 2 --dist loadfile tests/unit

lint: install
	uv run ruff check payflow lab tests
	uv run ruff format --check payflow lab tests
	uv run mypy
	uv run lint-imports  # the layers contract in pyproject.toml (docs/architecture.md)

# The readable head schema: payflow/db/schema.sql and each package's functions.sql, from a
# throwaway database migrated to head on this server (docs/architecture.md, "Schema and
# functions"). Run after adding or merging migrations, and commit what it writes.
SCHEMA_SERVER_URL ?= $(or $(PAYFLOW_TEST_PG),postgresql://postgres@127.0.0.1:5432)
schema: install
	uv run python -m payflow.db.schema $(SCHEMA_SERVER_URL)

bench: install
	uv run payflow migrate
	uv run payflow bench ledger --mode spread --events 20000 --concurrency 16
	uv run payflow bench ledger --mode hot --events 20000 --concurrency 16
	uv run payflow bench ledger --mode system --events 20000 --concurrency 16
	uv run payflow bench ledger --mode spread --events 20000 --concurrency 16 --dup 3
	uv run payflow bench api
	uv run payflow bench e2e --payments 2000 --rate 200 --split
	uv run payflow bench console

# The PgBouncer tests (tests/integration/db/pgbouncer) start their own private pgbouncer;
# this only installs the binary (Debian's package; it lands in /usr/sbin) when missing.
# payflow never uses the package's own pgbouncer service. Idempotent: a no-op once installed.
.PHONY: pgbouncer
test: pgbouncer
pgbouncer:
	@if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null; \
	fi

# anvil (a local Ethereum node for the chain tests and `payflow bench chain`): the npm
# package @foundry-rs/anvil, pinned; its binary ships in a platform package of the npm
# registry. Installed under .tools/ (found by lab/payflow_lab/anvil.py) when missing.
ANVIL_VERSION := 1.7.1
.PHONY: anvil chromium
anvil:
	@if [ ! -x .tools/node_modules/.bin/anvil ] && ! command -v anvil >/dev/null 2>&1; then \
		mkdir -p .tools && { [ -f .tools/package.json ] || echo '{"private": true}' > .tools/package.json; }; \
		npm install --prefix .tools --no-audit --no-fund --silent @foundry-rs/anvil@$(ANVIL_VERSION); \
	fi

# Debian's chromium for the console's browser tests (driven by Playwright with
# executable_path=/usr/bin/chromium; no browser download).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	fi

# The HA lab (lab/payflow_lab/ha, docs/deployment.md): pg_auto_failover (Debian's
# postgresql-15-auto-failover: pg_autoctl and the pgautofailover extension) and HAProxy;
# rabbitmq-server is already a dependency of the suite. Only the binaries: payflow never
# uses the packages' own services (the lab starts private processes in network
# namespaces). Idempotent: a no-op once installed.
.PHONY: ha-lab
test: ha-lab
ha-lab:
	@missing=""; \
	[ -x /usr/lib/postgresql/15/bin/pg_autoctl ] || missing="$$missing postgresql-15-auto-failover"; \
	[ -x /usr/sbin/haproxy ] || missing="$$missing haproxy"; \
	[ -x /usr/sbin/rabbitmq-server ] || missing="$$missing rabbitmq-server"; \
	if [ -n "$$missing" ]; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
