"""The address that was checked is the address that is connected to.

Real sockets throughout: receivers listen on 127.0.0.1 and 127.0.0.2 (same port), and
the only stub is DNS at the `socket.getaddrinfo` boundary (`tests.fake_dns`), which
answers the check and any later lookup differently, as a rebinding name does.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest

from payflow.config import Settings
from payflow.errors import WebhookTransportError
from payflow.webhooks.client import build_http_client
from payflow_lab.bench.submit import DirectSubmitter
from tests.fake_dns import FakeDns
from tests.integration.support import wait_until
from tests.integration.webhooks.http_requests import read_request

NAME = "hooks.rebind.test"
TLS_NAME = "hooks.tls.test"


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    return FakeDns(monkeypatch)


@dataclass
class Receiver:
    """An HTTP/1.1 server on one local address that records what reached it."""

    host: str
    tls: ssl.SSLContext | None = None
    port: int = 0
    hosts: list[str] = field(default_factory=list)  # Host header of each request
    server_names: list[str | None] = field(default_factory=list)  # TLS SNI per handshake
    _server: asyncio.AbstractServer | None = None

    async def start(self, port: int = 0) -> Receiver:
        if self.tls is not None:
            self.tls.sni_callback = self._record_sni
        self._server = await asyncio.start_server(self._serve, self.host, port, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def _record_sni(self, _sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        self.server_names.append(name)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                headers = await read_request(reader)
                self.hosts.append(headers.get("host", ""))
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def receivers() -> AsyncIterator[list[Receiver]]:
    started: list[Receiver] = []
    yield started
    for receiver in started:
        await receiver.stop()


async def _pair(
    receivers: list[Receiver], tls: Callable[[], ssl.SSLContext | None] = lambda: None
) -> tuple[Receiver, Receiver]:
    """The approved receiver on 127.0.0.1 and the rebound one on 127.0.0.2, same port
    (each with its own TLS context, so each records its own SNI)."""
    approved = await Receiver("127.0.0.1", tls()).start()
    rebound = await Receiver("127.0.0.2", tls()).start(approved.port)
    receivers.extend([approved, rebound])
    return approved, rebound


async def _delivered(pool: asyncpg.Pool, payment_id: uuid.UUID) -> bool:
    return bool(
        await pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        )
    )


async def test_rebinding_name_is_posted_to_the_checked_address_only(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    receivers: list[Receiver],
    fake_dns: FakeDns,
    start_roles,
) -> None:
    approved, rebound = await _pair(receivers)
    fake_dns.answer(NAME, ["127.0.0.1"], ["127.0.0.2"])  # the check, then any later lookup
    settings = pipe_settings.model_copy(update={"webhook_allow_hosts": (NAME,)})
    running = await start_roles(settings=settings)
    url = f"http://{NAME}:{approved.port}/hook"
    payment_id = await submitter.submit_payment(merchant[0], "3.00", "EUR", "k-pin", url)
    await wait_until(lambda: _delivered(pool, payment_id), what="pinned delivery")
    await running.stop()
    assert approved.hosts == [f"{NAME}:{approved.port}"]
    assert rebound.hosts == []
    assert fake_dns.lookups[NAME] == 1  # the check was the only lookup


async def test_public_at_check_then_loopback_never_reaches_loopback(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    receivers: list[Receiver],
    fake_dns: FakeDns,
    start_roles,
) -> None:
    internal = await Receiver("127.0.0.1").start()
    receivers.append(internal)
    # A public answer for the check, 127.0.0.1 for every lookup after it.
    fake_dns.answer(NAME, ["93.184.216.34"], ["127.0.0.1"])
    strict = pipe_settings.model_copy(update={"webhook_allow_hosts": (), "webhook_timeout_s": 0.5})
    running = await start_roles(settings=strict)
    url = f"http://{NAME}:{internal.port}/hook"
    payment_id = await submitter.submit_payment(merchant[0], "3.00", "EUR", "k-rebind", url)
    row = await wait_until(
        lambda: pool.fetchrow(
            "SELECT error FROM dead_letter_queue WHERE subject_id = $1", str(payment_id)
        ),
        what="the rebound delivery refused",
    )
    await running.stop()
    assert internal.hosts == []
    assert "non-public" in row["error"]
    # Attempt 1 went to the approved public address (unreachable here) and was counted;
    # attempt 2's check saw 127.0.0.1 and refused before any connection.
    payment = await pool.fetchrow(
        "SELECT webhook_attempts, webhook_delivered_at FROM payments WHERE id = $1", payment_id
    )
    assert payment["webhook_attempts"] == 1
    assert payment["webhook_delivered_at"] is None
    assert fake_dns.lookups[NAME] == 2  # one per check; the connections resolved nothing


async def test_the_transport_connects_to_the_pin_and_never_resolves(
    pipe_settings: Settings, receivers: list[Receiver], fake_dns: FakeDns
) -> None:
    approved, rebound = await _pair(receivers)
    fake_dns.answer(NAME, ["127.0.0.2"])
    url = f"http://{NAME}:{approved.port}/hook"
    async with build_http_client(pipe_settings) as client:
        for _ in range(2):  # the second request reuses the pooled connection
            assert await client.post(url, b"{}", {}, pinned=["127.0.0.1"]) == 200
        with pytest.raises(WebhookTransportError, match="pins no approved address"):
            await client.post(url, b"{}", {}, pinned=[])
    async with build_http_client(pipe_settings) as client:
        # Pinned addresses are tried in order: nothing listens on 127.0.0.3.
        assert await client.post(url, b"{}", {}, pinned=["127.0.0.3", "127.0.0.1"]) == 200
        # An IP-literal URL is posted only to itself, and only when it is pinned.
        literal = f"http://127.0.0.2:{approved.port}/hook"
        with pytest.raises(WebhookTransportError, match="not a pinned address"):
            await client.post(literal, b"{}", {}, pinned=["127.0.0.1"])
    assert approved.hosts == [f"{NAME}:{approved.port}"] * 3
    assert rebound.hosts == []
    assert fake_dns.lookups[NAME] == 0


def _certificates(directory: Path) -> tuple[Path, Path, Path, Path]:
    """A test CA, and two server certificates it signed: one for TLS_NAME, one for
    another name. Returns (ca, good chain, wrong-name chain, key)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    ca_key, ca = directory / "ca.key", directory / "ca.pem"
    key = directory / "server.key"
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
        "-subj", "/CN=payflow test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign",
    )  # fmt: skip
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key))
    chains = []
    for name in (TLS_NAME, "other.test"):
        csr, cert = directory / f"{name}.csr", directory / f"{name}.pem"
        extensions = directory / f"{name}.ext"
        extensions.write_text(
            f"subjectAltName=DNS:{name}\nbasicConstraints=CA:FALSE\n"
            "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
        )
        openssl("req", "-new", "-key", str(key), "-out", str(csr), "-subj", f"/CN={name}")
        openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
            "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(extensions),
        )  # fmt: skip
        chains.append(cert)
    return ca, chains[0], chains[1], key


def _server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


async def test_https_keeps_the_host_name_for_sni_host_and_certificate(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    receivers: list[Receiver],
    fake_dns: FakeDns,
    start_roles,
    tmp_path: Path,
) -> None:
    ca, good, _wrong, key = _certificates(tmp_path)
    approved, rebound = await _pair(receivers, lambda: _server_context(good, key))
    fake_dns.answer(TLS_NAME, ["127.0.0.1"], ["127.0.0.2"])
    settings = pipe_settings.model_copy(
        update={"webhook_allow_hosts": (TLS_NAME,), "webhook_ca_bundle": str(ca)}
    )
    running = await start_roles(settings=settings)
    url = f"https://{TLS_NAME}:{approved.port}/hook"
    payment_id = await submitter.submit_payment(merchant[0], "3.00", "EUR", "k-tls", url)
    await wait_until(lambda: _delivered(pool, payment_id), what="pinned https delivery")
    await running.stop()
    assert approved.server_names == [TLS_NAME]
    assert approved.hosts == [f"{TLS_NAME}:{approved.port}"]
    assert rebound.hosts == [] and rebound.server_names == []
    assert fake_dns.lookups[TLS_NAME] == 1


async def test_https_certificate_is_checked_against_the_host_name_not_the_ip(
    pipe_settings: Settings, receivers: list[Receiver], tmp_path: Path
) -> None:
    ca, _good, wrong, key = _certificates(tmp_path)
    impostor = await Receiver("127.0.0.1", _server_context(wrong, key)).start()
    receivers.append(impostor)
    settings = pipe_settings.model_copy(update={"webhook_ca_bundle": str(ca)})
    async with build_http_client(settings) as client:
        with pytest.raises(WebhookTransportError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.post(
                f"https://{TLS_NAME}:{impostor.port}/hook", b"{}", {}, pinned=["127.0.0.1"]
            )
    assert impostor.server_names == [TLS_NAME]
    assert impostor.hosts == []
