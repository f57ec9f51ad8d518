"""The harness behind `payflow bench` and `payflow chaos` lives in payflow_lab (lab/), a
separate package installed only with the dev dependencies (`uv sync`), never in the image.

payflow never imports payflow_lab at import time: each of those commands calls
`require_lab()` first and only then imports the harness inside its body, so a production
install lists the commands in `payflow --help` and refuses them with one line.
"""

from __future__ import annotations

import importlib.util

import typer

from payflow.commands.common import console

LAB_PACKAGE = "payflow_lab"


def lab_installed() -> bool:
    """True when the payflow_lab package can be imported (a dev install)."""
    return importlib.util.find_spec(LAB_PACKAGE) is not None


def require_lab(command: str) -> None:
    """Return when payflow_lab is installed; else print one line naming `command` (e.g.
    "payflow bench") and the dev install it needs, and exit 1."""
    if not lab_installed():
        console.print(
            f"payflow: `{command}` needs the dev install (the payflow_lab package: "
            "`uv sync` in a checkout); this install has only the service",
            style="red",
        )
        raise typer.Exit(1)
