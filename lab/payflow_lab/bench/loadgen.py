"""A small HTTP/1.1 keep-alive load generator that runs in its own processes.

Each process runs an asyncio loop (uvloop) with a share of the connections; every
connection sends one request, reads the whole response, and repeats until the
deadline. Only requests that start inside the measuring window are recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import time
from dataclasses import dataclass, field
from typing import Literal

import orjson

Endpoint = Literal["payments", "provider"]
# The registry's USDC contract on ETH_MAINNET (migration 0005); kept literal so the
# load-generator processes import nothing from payflow.
USDC_ETH_MAINNET = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"


@dataclass(frozen=True, slots=True)
class ClientJob:
    """What one load-generator process does."""

    endpoint: Endpoint
    host: str
    port: int
    connections: int
    start_at: float  # wall clock (time.time) when sending starts
    warmup: float
    seconds: float
    api_key: str
    provider_secret: str
    signature_header: str
    deposit_address: str
    tag: str


@dataclass(slots=True)
class ClientResult:
    latencies_ms: list[float] = field(default_factory=list)
    ok: int = 0
    errors: int = 0


def _payment_request(job: ClientJob, serial: str) -> bytes:
    body = orjson.dumps(
        {
            "amount": "10.00",
            "currency": "USD",
            "description": "bench",
            "metadata": {"order_id": serial},
        }
    )
    head = (
        "POST /api/v1/payments HTTP/1.1\r\n"
        f"Host: {job.host}\r\n"
        f"X-API-Key: {job.api_key}\r\n"
        f"Idempotency-Key: {serial}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _provider_request(job: ClientJob, serial: str) -> bytes:
    body = orjson.dumps(
        {
            "event_id": serial,
            "event_type": "deposit",
            "to_address": job.deposit_address,
            "asset": "USDC",
            "contract_address": USDC_ETH_MAINNET,
            "amount": "1.5",
            "tx_hash": "0x" + hashlib.sha256(serial.encode()).hexdigest(),
        }
    )
    signature = hmac.new(job.provider_secret.encode(), body, hashlib.sha256).hexdigest()
    head = (
        "POST /api/v1/webhooks/provider HTTP/1.1\r\n"
        f"Host: {job.host}\r\n"
        f"{job.signature_header}: {signature}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _connection(job: ClientJob, index: int, result: ClientResult) -> None:
    build = _payment_request if job.endpoint == "payments" else _provider_request
    reader, writer = await asyncio.open_connection(job.host, job.port)
    loop_start = time.perf_counter() + (job.start_at - time.time())
    measure_from = loop_start + job.warmup
    deadline = measure_from + job.seconds
    await asyncio.sleep(max(0.0, loop_start - time.perf_counter()))
    serial = 0
    try:
        while True:
            started = time.perf_counter()
            if started >= deadline:
                break
            serial += 1
            writer.write(build(job, f"{job.tag}-{os.getpid()}-{index}-{serial}"))
            status_line = await reader.readline()
            status = int(status_line.split(b" ", 2)[1])
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            finished = time.perf_counter()
            if started >= measure_from:
                result.latencies_ms.append((finished - started) * 1000)
                if status == 202:
                    result.ok += 1
                else:
                    result.errors += 1
    except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
        result.errors += 1
    finally:
        writer.close()


async def _run(job: ClientJob) -> ClientResult:
    result = ClientResult()
    await asyncio.gather(*(_connection(job, index, result) for index in range(job.connections)))
    return result


def run_client(job: ClientJob) -> ClientResult:
    """Entry point of one load-generator process."""
    import uvloop

    return uvloop.run(_run(job))
