"""Named SQL loader: each component keeps its SQL in one `queries.sql`.

Blocks start with `-- name: some_name`; the following comment lines describe
the parameters, and the rest up to the next name is the statement.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Final

_NAME_LINE: Final = re.compile(r"^--\s*name:\s*(?P<name>[a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Split a queries.sql text into {name: statement}; duplicate names are an error."""
    queries: dict[str, str] = {}
    matches = list(_NAME_LINE.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body_lines = [
            line
            for line in text[match.end() : end].strip().splitlines()
            if not line.lstrip().startswith("--")
        ]
        name = match.group("name")
        if name in queries:
            raise ValueError(f"duplicate query name {name!r}")
        queries[name] = "\n".join(body_lines).strip().rstrip(";")
    return queries


def load_queries(package: str) -> dict[str, str]:
    """Load `queries.sql` that sits beside `package`'s modules."""
    text = resources.files(package).joinpath("queries.sql").read_text(encoding="utf-8")
    return parse_queries(text)
