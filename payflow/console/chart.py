"""The overview's activity chart: payments and deposits per minute over the last hour,
with their terminal outcomes, drawn as inline SVG on the server (no script, no library).

Each kind gets one panel of 60 minute slots. In a slot the left bar is how many were
created that minute; the right bar stacks how many reached a terminal outcome that minute
(good outcome at the bottom, failure on top). Every bar has a `<title>` with its numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape

from markupsafe import Markup

MINUTES = 60
WIDTH, PANEL_H, TOP, BOTTOM, LEFT = 720, 120, 18, 16, 36
SLOT = (WIDTH - LEFT) / MINUTES


@dataclass(frozen=True, slots=True)
class Panel:
    """One kind: its name, the series names of created / good / failed, and totals."""

    title: str
    created: str
    good: str
    failed: str
    good_label: str


PANELS = (
    Panel("payments", "payments", "payments_succeeded", "payments_failed", "succeeded"),
    Panel("deposits", "deposits", "deposits_confirmed", "deposits_failed", "confirmed"),
)


def window_start(now: datetime) -> datetime:
    """The first whole minute of the hour shown (now's minute is the last slot)."""
    return now.replace(second=0, microsecond=0) - timedelta(minutes=MINUTES - 1)


def bucket(rows: Iterable[Mapping[str, object]], start: datetime) -> dict[str, list[int]]:
    """Rows of (series, minute, n) as {series: [count per minute slot]} (60 slots)."""
    out: dict[str, list[int]] = {}
    for row in rows:
        minute = row["minute"]
        count = row["n"]
        series = str(row["series"])
        if not isinstance(minute, datetime) or not isinstance(count, int):
            continue
        slot = int((minute - start).total_seconds() // 60)
        if 0 <= slot < MINUTES:
            out.setdefault(series, [0] * MINUTES)[slot] += count
    return out


def totals(series: Mapping[str, list[int]]) -> dict[str, int]:
    """The hour's total of each series."""
    return {name: sum(values) for name, values in series.items()}


def _rect(x: float, y: float, w: float, h: float, cls: str, title: str) -> str:
    return (
        f'<rect class="{cls}" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}">'
        f"<title>{escape(title)}</title></rect>"
    )


def render(series: Mapping[str, list[int]], start: datetime) -> Markup:
    """The whole chart as one `<svg>` element (safe markup: every text is escaped)."""
    height = len(PANELS) * (PANEL_H + TOP + BOTTOM)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="payments and deposits per minute, last hour" '
        f'xmlns="http://www.w3.org/2000/svg">'
    ]
    zero = [0] * MINUTES
    for index, panel in enumerate(PANELS):
        top = index * (PANEL_H + TOP + BOTTOM) + TOP
        created = series.get(panel.created, zero)
        good = series.get(panel.good, zero)
        failed = series.get(panel.failed, zero)
        peak = max([1, *created, *(g + f for g, f in zip(good, failed, strict=True))])
        base = top + PANEL_H
        parts.append(
            f'<text class="label" x="0" y="{top - 5}">{escape(panel.title)} per minute '
            f"(created {sum(created)}, {panel.good_label} {sum(good)}, failed {sum(failed)})"
            "</text>"
        )
        parts.append(f'<text class="axis" x="0" y="{top + 10}">{peak}</text>')
        parts.append(f'<text class="axis" x="0" y="{base}">0</text>')
        parts.append(f'<line class="base" x1="{LEFT}" y1="{base}" x2="{WIDTH}" y2="{base}"></line>')
        for slot in range(MINUTES):
            x = LEFT + slot * SLOT
            minute = (start + timedelta(minutes=slot)).strftime("%H:%M")
            half = SLOT / 2 - 0.5
            if created[slot]:
                h = PANEL_H * created[slot] / peak
                parts.append(
                    _rect(x, base - h, half, h, "created", f"{minute}: {created[slot]} created")
                )
            if good[slot]:
                h = PANEL_H * good[slot] / peak
                label = f"{minute}: {good[slot]} {panel.good_label}"
                parts.append(_rect(x + half, base - h, half, h, "good", label))
            if failed[slot]:
                below = PANEL_H * good[slot] / peak
                h = PANEL_H * failed[slot] / peak
                label = f"{minute}: {failed[slot]} failed"
                parts.append(_rect(x + half, base - below - h, half, h, "failed", label))
        first, last = (
            start.strftime("%H:%M"),
            (start + timedelta(minutes=MINUTES - 1)).strftime("%H:%M"),
        )
        parts.append(f'<text class="axis" x="{LEFT}" y="{base + 12}">{first} UTC</text>')
        parts.append(
            f'<text class="axis" x="{WIDTH}" y="{base + 12}" text-anchor="end">{last}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - built above from numbers and escaped text
