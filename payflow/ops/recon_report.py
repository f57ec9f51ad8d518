"""`payflow recon`: run a reconciliation and print a short report."""

from __future__ import annotations

from rich.console import Console

from payflow.config import Settings
from payflow.db.pool import tool_pool
from payflow.ledger.recon import ReconReport, reconcile
from payflow.money import format_amount

SHOWN = 10


def render(report: ReconReport, console: Console) -> None:
    """Print the report: one summary line, then at most a few examples of each problem."""
    verdict = "clean" if report.clean else "DIRTY"
    console.print(
        f"recon scope={report.scope} accounts={report.accounts_checked} "
        f"mismatches={len(report.mismatches)} duplicates={len(report.duplicate_ledger_events)} "
        f"confirmed_without_ledger={len(report.confirmed_without_ledger)} "
        f"ledger_without_confirmation={len(report.ledger_without_confirmation)} "
        + (
            f"unbalanced_assets={len(report.unbalanced_assets)} "
            f"unbalanced_postings={len(report.unbalanced_postings)} "
            if report.scope == "full"
            else ""
        )
        + f"result={verdict}"
    )
    for line in report.trial_balance:
        state = "balanced" if line.balanced else "UNBALANCED"
        console.print(
            f"  trial balance {line.asset or '(unknown account)'}: debits "
            f"{format_amount(line.debits)} credits {format_amount(line.credits)} {state}"
        )
    for posting in report.unbalanced_postings[:SHOWN]:
        console.print(
            f"  unbalanced posting {posting.posting}: {posting.asset or '(unknown account)'}"
            f" legs sum to {format_amount(posting.total)}"
        )
    for mismatch in report.mismatches[:SHOWN]:
        console.print(
            f"  account {mismatch.account_id}: balance {format_amount(mismatch.balance)} "
            f"!= expected {format_amount(mismatch.expected)}"
        )
    for label, items in (
        ("duplicate ledger rows for event", report.duplicate_ledger_events),
        ("confirmed without ledger row", report.confirmed_without_ledger),
        ("ledger row for unconfirmed event", report.ledger_without_confirmation),
    ):
        for item in items[:SHOWN]:
            console.print(f"  {label}: {item}")


async def run_recon(settings: Settings, *, full: bool) -> bool:
    """Reconcile and print; True when clean."""
    async with tool_pool(settings.database) as pool:
        report = await reconcile(
            pool, settings, full=full, recent_minutes=settings.recon_recent_minutes
        )
    render(report, Console(soft_wrap=True, markup=False, highlight=False))
    return report.clean
