"""A local Ethereum node for tests and benchmarks: anvil from the npm package
`@foundry-rs/anvil` (pinned in the Makefile, installed under `.tools/` by `make`).

`AnvilNode.start()` runs anvil on a free port with `--slots-in-an-epoch 1`, so the
`finalized` block is two blocks behind `latest`. The helpers drive it the way tests
need: mine, reorg, send native value from the default unlocked accounts, deploy and use
the `TestToken` ERC-20 (source and compiled bytecode in `payflow_lab/contracts/`).

Not used by the service itself: production talks to a real node through `RpcClient`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from eth_abi.abi import encode as abi_encode
from eth_utils.abi import function_signature_to_4byte_selector
from eth_utils.address import to_checksum_address

from payflow.chain.rpc import RpcClient, hex_int, to_hex
from payflow.errors import ToolMissing
from payflow_lab.ports import free_port

ANVIL_VERSION = "1.7.1"
# anvil's default mnemonic: accounts 0..9 are unlocked and hold 10,000 ETH each.
DEFAULT_MNEMONIC = "test test test test test test test test test test test junk"
DEFAULT_ACCOUNTS = (
    "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
    "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
    "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
    "0x15d34aaf54267db7d7c367839aaf71a00a2c6a65",
    "0x9965507d1a55bcc2695c58ba16fb37d819b0a4dc",
    "0x976ea74026e726554db657fa54763abd0c3a0aa9",
    "0x14dc79964da2c08b23698b3d3cc7ca32193d9955",
    "0x23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f",
    "0xa0ee7a142d267c1f36714e4a8f75612f20a79720",
)
WEI_PER_ETH = 10**18


class AnvilNotInstalled(ToolMissing):
    """No anvil binary: run `make anvil` (npm install of @foundry-rs/anvil)."""


def find_anvil() -> str:
    """The anvil binary: `$ANVIL_BIN`, the repo's `.tools/node_modules/.bin/anvil`, PATH."""
    explicit = os.environ.get("ANVIL_BIN")
    if explicit:
        if not os.access(explicit, os.X_OK) or not Path(explicit).is_file():
            raise AnvilNotInstalled(f"ANVIL_BIN={explicit!r} is not an executable file")
        return explicit
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / ".tools" / "node_modules" / ".bin" / "anvil"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("anvil")
    if found:
        return found
    raise AnvilNotInstalled("anvil not found: run `make anvil` or set ANVIL_BIN")


@cache
def token_artifact(contract: str = "TestToken") -> dict[str, Any]:
    """A compiled test contract (abi, bytecode, compiler, source digest): `TestToken`, or
    `QuirkToken` (returns false for a blocked recipient; optionally returns nothing)."""
    text = resources.files("payflow_lab.contracts").joinpath(f"{contract}.json").read_text()
    artifact: dict[str, Any] = json.loads(text)
    return artifact


def selector(signature: str) -> str:
    return "0x" + function_signature_to_4byte_selector(signature).hex()


def encode_call(signature: str, types: list[str], args: list[Any]) -> str:
    """Calldata for `signature` (e.g. "transfer(address,uint256)") with `args`."""
    return selector(signature) + abi_encode(types, args).hex()


class AnvilNode:
    """One anvil process on `host:port` (127.0.0.1 unless told); `rpc` is a client to it."""

    def __init__(
        self,
        *,
        port: int | None = None,
        slots_in_an_epoch: int = 1,
        automine: bool = True,
        block_time_s: float | None = None,
        state_path: str | None = None,
        extra_args: tuple[str, ...] = (),
        log_path: str | None = None,
        chain_id: int = 1,
        host: str = "127.0.0.1",
    ) -> None:
        self.host = host  # another address: the HA lab's hosts reach it on their bridge
        self.port = port or free_port()
        # The EIP-155 id anvil answers: 1 by default, the id of `ETH_MAINNET` (whose
        # `chains` row and `ETH_CHAIN_ID` say 1), so payflow's identity check accepts
        # the test node; a test of another network starts anvil with its own id.
        self.chain_id = chain_id
        self.slots_in_an_epoch = slots_in_an_epoch
        self.automine = automine
        self.block_time_s = block_time_s
        self.state_path = state_path
        self.extra_args = extra_args
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.rpc = RpcClient(self.url, timeout_s=10.0)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        args = [
            find_anvil(),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--slots-in-an-epoch",
            str(self.slots_in_an_epoch),
            "--chain-id",
            str(self.chain_id),
            "--silent",
        ]
        if not self.automine:
            args.append("--no-mining")
        if self.block_time_s is not None:
            args += ["--block-time", str(self.block_time_s)]
        if self.state_path is not None:
            args += ["--state", self.state_path, "--state-interval", "1"]
        return args + list(self.extra_args)

    def start(self, timeout_s: float = 60.0) -> AnvilNode:
        """Start anvil and wait until it answers `eth_chainId`."""
        if self.log_path:
            with open(self.log_path, "ab") as out:  # the child keeps its own descriptor
                self.process = subprocess.Popen(  # noqa: S603
                    self.command(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
        else:
            self.process = subprocess.Popen(  # noqa: S603
                self.command(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"anvil exited with {self.process.returncode}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"anvil did not listen on {self.port} within {timeout_s}s")

    def _signal(self, sig: signal.Signals) -> None:
        """Signal anvil's whole process group: the npm entry point is a Node.js wrapper
        that runs the native binary as its child (started in its own session)."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL: the node vanishes at once (its state is lost unless `state_path`)."""
        if self.process is not None and self.process.poll() is None:
            self._signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self._signal(signal.SIGCONT)  # a paused node must be able to exit
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: connections hang (a node that stopped answering)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    async def aclose(self) -> None:
        await self.rpc.aclose()
        self.stop()

    # --- driving the chain -----------------------------------------------------------

    async def mine(self, blocks: int = 1) -> None:
        await self.rpc.call("anvil_mine", to_hex(blocks))

    async def head(self) -> int:
        return await self.rpc.block_number()

    async def finalized(self) -> int:
        block = await self.rpc.get_block("finalized")
        assert block is not None
        number = hex_int(block["number"])
        assert number is not None
        return number

    async def reorg(self, depth: int, txs: list[tuple[dict[str, Any], int]] = ()) -> None:  # type: ignore[assignment]
        """`anvil_reorg`: replace the last `depth` blocks; `txs` are (tx object, block
        offset inside the new blocks) to include there (a signed raw hex works too)."""
        await self.rpc.call("anvil_reorg", depth, [[tx, offset] for tx, offset in txs])

    async def set_automine(self, on: bool) -> None:
        await self.rpc.call("evm_setAutomine", on)
        self.automine = on

    async def set_balance(self, address: str, wei: int) -> None:
        await self.rpc.call("anvil_setBalance", address, to_hex(wei))

    async def send(self, tx: dict[str, Any]) -> str:
        """`eth_sendTransaction` from an unlocked account; the tx hash."""
        tx_hash: str = await self.rpc.call("eth_sendTransaction", tx)
        return tx_hash

    async def send_eth(self, to: str, wei: int, *, sender: str = DEFAULT_ACCOUNTS[0]) -> str:
        return await self.send({"from": sender, "to": to, "value": to_hex(wei)})

    async def receipt(self, tx_hash: str, timeout_s: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            found = await self.rpc.get_receipt(tx_hash)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"no receipt for {tx_hash}")
            await asyncio.sleep(0.05)

    async def deploy_token(
        self,
        name: str = "Test USD Coin",
        symbol: str = "USDC",
        decimals: int = 6,
        *,
        sender: str = DEFAULT_ACCOUNTS[0],
    ) -> str:
        """Deploy a `TestToken`; its contract address (lower case)."""
        args = abi_encode(["string", "string", "uint8"], [name, symbol, decimals]).hex()
        tx_hash = await self.send(
            {"from": sender, "data": token_artifact()["bytecode"] + args, "gas": to_hex(3_000_000)}
        )
        receipt = await self.receipt(tx_hash)
        address: str = receipt["contractAddress"]
        return address.lower()

    async def deploy_quirk_token(
        self,
        name: str = "Quirk USD",
        symbol: str = "QUSD",
        decimals: int = 6,
        *,
        silent: bool = False,
        sender: str = DEFAULT_ACCOUNTS[0],
    ) -> str:
        """Deploy a `QuirkToken` (`transfer` returns false without reverting for a blocked
        recipient; `silent`: returns no data, the USDT style); its address (lower case).
        `token_mint` and `token_balance` work on it too."""
        args = abi_encode(
            ["string", "string", "uint8", "bool"], [name, symbol, decimals, silent]
        ).hex()
        tx_hash = await self.send(
            {
                "from": sender,
                "data": token_artifact("QuirkToken")["bytecode"] + args,
                "gas": to_hex(3_000_000),
            }
        )
        receipt = await self.receipt(tx_hash)
        address: str = receipt["contractAddress"]
        return address.lower()

    async def token_set_blocked(self, token: str, holder: str, blocked: bool) -> str:
        """`QuirkToken.setBlocked(holder, blocked)`."""
        data = encode_call("setBlocked(address,bool)", ["address", "bool"], [holder, blocked])
        return await self.send({"from": DEFAULT_ACCOUNTS[0], "to": token, "data": data})

    async def _mined(self, tx_hash: str) -> str:
        """`tx_hash`, once mined when the node automines: the next transaction (from any
        account) is then estimated on this one's effects. Without the wait, a transfer of
        tokens just minted or sent to another account could be estimated while they were
        still pending, as a revert, and then run out of gas once mined."""
        if self.automine:
            await self.receipt(tx_hash)
        return tx_hash

    async def token_mint(self, token: str, to: str, units: int) -> str:
        """`mint(to, units)`; returned once mined (automining)."""
        data = encode_call("mint(address,uint256)", ["address", "uint256"], [to, units])
        return await self._mined(
            await self.send({"from": DEFAULT_ACCOUNTS[0], "to": token, "data": data})
        )

    async def token_transfer(
        self, token: str, to: str, units: int, *, sender: str = DEFAULT_ACCOUNTS[0]
    ) -> str:
        """`transfer(to, units)` from `sender` (mint to `sender` first); returned once mined
        (automining)."""
        data = encode_call("transfer(address,uint256)", ["address", "uint256"], [to, units])
        return await self._mined(await self.send({"from": sender, "to": token, "data": data}))

    async def token_batch_transfer(
        self, token: str, transfers: list[tuple[str, int]], *, sender: str = DEFAULT_ACCOUNTS[0]
    ) -> str:
        """Several `Transfer` logs in one transaction (positions 0..n-1)."""
        data = encode_call(
            "batchTransfer(address[],uint256[])",
            ["address[]", "uint256[]"],
            [[to_checksum_address(t) for t, _ in transfers], [u for _, u in transfers]],
        )
        return await self.send(
            {
                "from": sender,
                "to": token,
                "data": data,
                "gas": to_hex(200_000 + 60_000 * len(transfers)),
            }
        )

    async def token_set_paused(self, token: str, paused: bool) -> str:
        data = encode_call("setPaused(bool)", ["bool"], [paused])
        return await self.send({"from": DEFAULT_ACCOUNTS[0], "to": token, "data": data})

    async def token_balance(self, token: str, holder: str) -> int:
        data = encode_call("balanceOf(address)", ["address"], [holder])
        value = hex_int(await self.rpc.call("eth_call", {"to": token, "data": data}, "latest"))
        assert value is not None
        return value
