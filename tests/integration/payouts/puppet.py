"""A contract for payout-proof tests whose logs are set from outside: runtime bytecode put
at an address with `anvil_setCode`, its storage set with `anvil_setStorageAt`.

On any call it emits up to two ERC-20 `Transfer(from, to, value)` logs (slots 1-3 and
4-6; a log is emitted when its `from` slot is non-zero), then, when slot 7 holds an
address, calls it with the contract's whole ETH balance (a forwarding contract, or a
token facade whose logs come from another contract), and returns 2**256 - 1 (`true`
to `transfer`, a balance that covers any payout to `balanceOf`). Nothing is
moved: the logs say whatever the test made them say, which is the point: payflow must
judge a receipt by what the logs prove, not by whom it called."""

from __future__ import annotations

from payflow.chain.payouts.proof import TRANSFER_TOPIC
from payflow.chain.rpc import to_hex
from payflow_lab.anvil import AnvilNode


def _asm() -> str:
    code: list[str] = []
    labels: dict[str, int] = {}
    fixups: list[tuple[int, str]] = []

    def op(*parts: str) -> None:
        code.extend(parts)

    def jumpi(label: str) -> None:
        op("60")
        fixups.append((len(code), label))
        op("00", "57")

    def mark(label: str) -> None:
        labels[label] = sum(len(part) // 2 for part in code)  # byte offset
        op("5b")

    for n, base in ((1, 1), (2, 4)):
        op("60", f"{base:02x}", "54", "15")  # from == 0 ?
        jumpi(f"skip{n}")
        op("60", f"{base + 2:02x}", "54", "60", "00", "52")  # mem[0] = value
        op("60", f"{base + 1:02x}", "54")  # topic2 = to
        op("60", f"{base:02x}", "54")  # topic1 = from
        op("7f", TRANSFER_TOPIC.removeprefix("0x"))  # topic0
        op("60", "20", "60", "00", "a3")  # LOG3(0, 32, ...)
        mark(f"skip{n}")
    op("60", "07", "54", "80", "15")  # forward = sload(7); == 0 ?
    jumpi("done")
    op("60", "00", "60", "00", "60", "00", "60", "00", "47", "85", "5a", "f1", "50")
    mark("done")
    op("50", "60", "00", "19", "60", "00", "52", "60", "20", "60", "00", "f3")  # return ~0
    for at, label in fixups:
        code[at] = f"{labels[label]:02x}"
    return "0x" + "".join(code)


RUNTIME = _asm()


def word(value: int | str) -> str:
    """A storage word: an int or an address."""
    number = int(value, 16) if isinstance(value, str) else value
    return "0x" + format(number, "064x")


async def puppet(
    anvil: AnvilNode,
    address: str,
    logs: list[tuple[str, str, int]] = (),  # type: ignore[assignment]
    forward_to: str | None = None,
) -> str:
    """Put the puppet at `address` emitting `logs` [(from, to, value)] on every call and
    forwarding to `forward_to`; its address (lower case)."""
    await anvil.rpc.call("anvil_setCode", address, RUNTIME)
    for i, (sender, to, value) in enumerate(logs):
        for j, item in enumerate((sender, to, value)):
            await anvil.rpc.call("anvil_setStorageAt", address, to_hex(1 + 3 * i + j), word(item))
    if forward_to is not None:
        await anvil.rpc.call("anvil_setStorageAt", address, to_hex(7), word(forward_to))
    return address.lower()
