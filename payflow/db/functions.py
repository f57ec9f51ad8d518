"""Each SQL function's current definition, kept beside the package that owns it.

Migrations freeze history; a `functions.sql` beside a package (payflow/ledger/,
payflow/payments/, …) shows what each of its functions is TODAY. A file is a list of
entries, each

    -- name: payment_finalize
    -- (comment lines describing the function, kept as written)
    CREATE OR REPLACE FUNCTION public.payment_finalize(…)
     RETURNS …
    AS $function$
    …
    $function$;

where the statement is exactly PostgreSQL's `pg_get_functiondef` of the function at the
head revision, so running it recreates that function unchanged. `python -m
payflow.db.schema` rewrites the statements from a database migrated to head (the
comments stay), and tests/integration/db/test_schema.py checks that they match.

A new migration may take a new function body from here (`function_definition`): see
docs/architecture.md, "Schema and functions".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import payflow

FUNCTIONS_FILE: Final = "functions.sql"

_NAME_LINE: Final = re.compile(r"^-- name: (?P<name>[a-z_][a-z0-9_]*)[ \t]*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class FunctionEntry:
    """One function of a functions.sql: its name, the comment lines under the name
    (without a trailing newline; "" for none) and its statement (no trailing `;`, ""
    when the entry is a placeholder the generator has yet to fill)."""

    name: str
    comments: str
    statement: str


@dataclass(frozen=True, slots=True)
class FunctionsFile:
    """A parsed functions.sql: the comment lines before the first entry, then the
    entries in file order."""

    preamble: str
    entries: tuple[FunctionEntry, ...]

    def by_name(self) -> dict[str, FunctionEntry]:
        """{function name: entry}."""
        return {entry.name: entry for entry in self.entries}


def parse_functions(text: str) -> FunctionsFile:
    """Split a functions.sql text into its entries.

    Raises `ValueError` when a name comes twice or text other than comments precedes the
    first `-- name:` line. The comment lines directly under a name are the entry's
    comments; everything after them up to the next name is its statement (comments
    inside a function body are part of the statement).
    """
    matches = list(_NAME_LINE.finditer(text))
    head = text[: matches[0].start()] if matches else text
    if any(line.strip() and not line.startswith("--") for line in head.splitlines()):
        raise ValueError("functions.sql: only comments may precede the first '-- name:' line")
    entries: list[FunctionEntry] = []
    seen: set[str] = set()
    for index, match in enumerate(matches):
        name = match.group("name")
        if name in seen:
            raise ValueError(f"functions.sql: function {name!r} is listed twice")
        seen.add(name)
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        lines = text[match.end() : end].strip("\n").splitlines()
        split = 0
        while split < len(lines) and lines[split].startswith("--"):
            split += 1
        comments = "\n".join(lines[:split])
        statement = "\n".join(lines[split:]).strip()
        if statement.endswith(";"):
            statement = statement[:-1].rstrip()
        entries.append(FunctionEntry(name=name, comments=comments, statement=statement))
    return FunctionsFile(preamble=head.strip("\n"), entries=tuple(entries))


def render_functions(functions: FunctionsFile) -> str:
    """The text of a functions.sql (the inverse of `parse_functions`)."""
    parts = [functions.preamble] if functions.preamble else []
    for entry in functions.entries:
        lines = [f"-- name: {entry.name}"]
        if entry.comments:
            lines.append(entry.comments)
        if entry.statement:
            lines.append(entry.statement + ";")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def normalise_definition(text: str) -> str:
    """A function definition compared line by line: trailing blanks on each line, blank
    lines at either end and a final `;` do not count (an editor may strip them)."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    body = "\n".join(lines).strip()
    return body[:-1].rstrip() if body.endswith(";") else body


def package_root() -> Path:
    """The directory of the `payflow` package (the source tree in a development install)."""
    return Path(payflow.__file__).resolve().parent


def function_files(root: Path | None = None) -> dict[str, Path]:
    """{package dotted name: its functions.sql}, for every functions.sql under `root`
    (default: the payflow package), sorted by package name."""
    base = root or package_root()
    found = {
        ".".join(("payflow", *path.parent.relative_to(base).parts)): path
        for path in base.rglob(FUNCTIONS_FILE)
    }
    return dict(sorted(found.items()))


def read_functions(path: Path) -> FunctionsFile:
    """Parse the functions.sql at `path`."""
    return parse_functions(path.read_text(encoding="utf-8"))


def owners(root: Path | None = None) -> dict[str, str]:
    """{function name: package dotted name whose functions.sql lists it}.

    Raises `ValueError` when two packages list the same function."""
    owned: dict[str, str] = {}
    for package, path in function_files(root).items():
        for entry in read_functions(path).entries:
            if entry.name in owned:
                raise ValueError(
                    f"function {entry.name!r} is listed by both {owned[entry.name]} and {package}"
                )
            owned[entry.name] = package
    return owned


def function_definition(package: str, name: str) -> str:
    """The `CREATE OR REPLACE FUNCTION` statement of function `name` in the functions.sql
    beside `package` (e.g. "payflow.payments"), without a trailing `;`.

    For a NEW migration that creates or replaces the function. Raises `KeyError` when the
    file does not list it (or lists it without a statement)."""
    path = package_root().joinpath(*package.split(".")[1:], FUNCTIONS_FILE)
    entry = read_functions(path).by_name().get(name)
    if entry is None or not entry.statement:
        raise KeyError(f"{path} has no statement for function {name!r}")
    return entry.statement
