"""`payflow bench api`: the API as it runs in production, under load from other processes.

The API runs as `payflow api` (uvicorn workers as configured) against a separate
`<database>_bench` database that is pre-filled and VACUUM ANALYZEd. Load comes from
separate processes (`payflow_lab.bench.loadgen`). For each endpoint and concurrency the
last line is machine-readable:
`endpoint=… concurrency=… rps=… p50_ms=… p99_ms=… errors=… rss_mb=…`.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import psutil

from payflow.api.auth import SQL as API_SQL
from payflow.api.auth import hash_api_key
from payflow.config import Settings
from payflow.db import migrate
from payflow_lab.bench.common import percentile, setup_url

from .loadgen import ClientJob, ClientResult, Endpoint, run_client

DEPOSIT_ADDRESS = "0x" + "be" * 20


@dataclass(frozen=True, slots=True)
class ApiBenchConfig:
    seconds: float = 5.0
    concurrency: tuple[int, ...] = (10, 50)
    workers: int | None = None
    clients: int = 2
    prefill: int = 200_000
    port: int = 8765
    warmup: float = 1.0


def _bench_url(settings: Settings) -> str:
    base, _, name = settings.database_url.rpartition("/")
    name = name.split("?", 1)[0]
    return f"{base}/{name}_bench"


async def _prepare(url: str, api_key: str, prefill: int) -> None:
    """Migrate, create the bench merchant, account and address, pre-fill, VACUUM ANALYZE."""
    conn = await asyncpg.connect(url)
    try:
        digest = hash_api_key(api_key)
        merchant_id = await conn.fetchval(
            "SELECT merchant_id FROM api_keys WHERE key_hash = $1", digest
        )
        if merchant_id is None:
            merchant_id = await conn.fetchval(
                API_SQL["create_merchant"], "bench", "whsec_bench", False
            )
            await conn.execute(
                API_SQL["insert_api_key"], merchant_id, "default", "write", digest, None, None
            )
        exists = await conn.fetchval(
            "SELECT 1 FROM deposit_addresses WHERE chain = 'ETH_MAINNET' AND address = $1",
            DEPOSIT_ADDRESS,
        )
        if not exists:
            account_id = await conn.fetchval(
                "INSERT INTO accounts (merchant_id, asset) VALUES ($1, 'USDC') RETURNING id",
                merchant_id,
            )
            await conn.execute(
                "INSERT INTO deposit_addresses (chain, address, account_id)"
                " VALUES ('ETH_MAINNET', $1, $2)",
                DEPOSIT_ADDRESS,
                account_id,
            )
        have = await conn.fetchval("SELECT count(*) FROM payments")
        missing = max(0, prefill - have)
        if missing:
            print(f"bench: pre-filling {missing} payments", file=sys.stderr)
            await conn.execute(
                """
                WITH p AS (
                    INSERT INTO payments (merchant_id, amount, currency, description, metadata,
                                          idempotency_key, created_at)
                    SELECT $1, 10.00, 'USD', 'prefill', '{"order_id": "x"}'::jsonb,
                           'prefill-' || $3 || '-' || g, now() - make_interval(secs => g)
                    FROM generate_series(1, $2) AS g
                    RETURNING id, idempotency_key, created_at
                ), i AS (
                    INSERT INTO api_idempotency
                        (merchant_id, scope, key, request_hash, state, response_status,
                         response_body, created_at)
                    SELECT $1, 'payments.create', idempotency_key, md5(idempotency_key),
                           'completed', 202, json_build_object('payment_id', id::text), created_at
                    FROM p
                )
                INSERT INTO outbox (topic, payload, created_at, published_at)
                SELECT 'payment.created', jsonb_build_object('version', 1, 'payment_id', id::text),
                       created_at, created_at
                FROM p
                """,
                merchant_id,
                missing,
                secrets.token_hex(4),
            )
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


def _free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


class RssSampler:
    """Samples the RSS of the server and its worker processes; keeps each one's peak."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peaks: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                processes = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            for process in processes:
                try:
                    rss = process.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                self.peaks[process.pid] = max(self.peaks.get(process.pid, 0.0), rss)
            self._stop.wait(0.2)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run_load(
    endpoint: Endpoint,
    concurrency: int,
    config: ApiBenchConfig,
    env: dict[str, str],
    settings: Settings,
    tag: str,
) -> list[ClientResult]:
    clients = max(1, min(config.clients, concurrency))
    shares = [
        concurrency // clients + (1 if i < concurrency % clients else 0) for i in range(clients)
    ]
    start_at = time.time() + 2.0  # spawn and connect before the start line
    jobs = [
        ClientJob(
            endpoint=endpoint,
            host="127.0.0.1",
            port=config.port,
            connections=share,
            start_at=start_at,
            warmup=config.warmup,
            seconds=config.seconds,
            api_key=env["API_KEY"],
            provider_secret=env["PROVIDER_WEBHOOK_SECRET"],
            signature_header=settings.provider_signature_header,
            deposit_address=DEPOSIT_ADDRESS,
            tag=f"{tag}-{endpoint}-{concurrency}-{index}",
        )
        for index, share in enumerate(shares)
    ]
    context = multiprocessing.get_context("spawn")
    with context.Pool(clients) as pool:
        return pool.map(run_client, jobs)


def _start_server(
    env: dict[str, str], config: ApiBenchConfig, workers: int
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-c", "from payflow.cli import main; main()", "api"]
    command += ["--port", str(config.port), "--workers", str(workers), "--host", "127.0.0.1"]
    process = subprocess.Popen(command, env=env)  # noqa: S603 - our own interpreter and CLI
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError("the API exited during start-up")
        try:
            response = httpx.get(
                f"http://127.0.0.1:{config.port}/health", headers={"X-API-Key": env["API_KEY"]}
            )
            if response.status_code == 200:
                return process
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.terminate()
            raise RuntimeError("the API did not answer /health within 60 s")
        time.sleep(0.2)


def run_api_bench(settings: Settings, config: ApiBenchConfig) -> bool:
    """Run every (endpoint, concurrency) pair and print the figures; False on any error."""
    if not _free(config.port):
        print(f"payflow: port {config.port} is busy; pass --port", file=sys.stderr)
        return False
    url = _bench_url(settings)
    admin = setup_url(settings, url)  # bulk pre-fill and VACUUM need more than the service role
    migrate.migrate_database(
        admin,
        owner=settings.db_owner_role,
        app=migrate.login_role(url),
        app_password=migrate.login_password(url),
    )
    api_key = settings.api_key or "bench-" + secrets.token_urlsafe(24)
    secret = settings.provider_webhook_secret or secrets.token_hex(32)
    asyncio.run(_prepare(admin, api_key, config.prefill))
    workers = config.workers or settings.api_workers
    env: dict[str, Any] = {
        **os.environ,
        "DATABASE_URL": url,
        "API_KEY": api_key,
        "PROVIDER_WEBHOOK_SECRET": secret,
        "RATE_LIMIT_PER_MINUTE": "100000000",
        "LOG_LEVEL": "WARNING",
        "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix="payflow-bench-metrics-"),
    }
    tag = secrets.token_hex(4)
    print(
        f"bench api: workers={workers} clients={config.clients} seconds={config.seconds}"
        f" warmup={config.warmup} cpus={os.cpu_count()} database={url.rsplit('/', 1)[-1]}"
    )
    server = _start_server(env, config, workers)
    ok = True
    try:
        for endpoint in ("payments", "provider"):
            for concurrency in config.concurrency:
                with RssSampler(server.pid) as sampler:
                    results = _run_load(endpoint, concurrency, config, env, settings, tag)
                latencies = [value for result in results for value in result.latencies_ms]
                accepted = sum(result.ok for result in results)
                errors = sum(result.errors for result in results)
                rps = accepted / config.seconds
                ordered = sorted(latencies)
                p50, p99 = percentile(ordered, 0.50), percentile(ordered, 0.99)
                workers_rss = {
                    pid: peak for pid, peak in sampler.peaks.items() if pid != server.pid
                } or sampler.peaks
                rss = max(workers_rss.values(), default=0.0)
                per_process = " ".join(
                    f"pid{pid}={peak:.0f}MB" for pid, peak in sorted(sampler.peaks.items())
                )
                print(
                    f"{endpoint} @ {concurrency}: {rps:,.0f} accepted/s, p50 {p50:.1f} ms,"
                    f" p99 {p99:.1f} ms, errors {errors}; peak RSS {per_process}"
                )
                print(
                    f"endpoint={endpoint} concurrency={concurrency} rps={rps:.0f}"
                    f" p50_ms={p50:.2f} p99_ms={p99:.2f} errors={errors} rss_mb={rss:.0f}",
                    flush=True,
                )
                ok = ok and errors == 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)  # reaped: the bench leaves no process behind
    return ok
