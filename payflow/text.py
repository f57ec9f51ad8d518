"""The one rule for free text a merchant names (a webhook endpoint's description, an API
key's name, a payment's description): no control characters and no bidirectional
overrides or isolates. A description may run over several lines (tab, line feed and
carriage return are its only controls); a name is one line.

C0 controls (U+0000 to U+001F), DEL and C1 controls
(U+007F to U+009F) are not text a person reads, and terminals, logs and CSV exports act
on them; the bidi overrides and isolates (U+202A to U+202E, U+2066 to U+2069) reorder what
follows them, so `invoice<U+202E>gnp.exe` displays as something it is not (the "Trojan
Source" spoofing). Each caller refuses such text with its own error (a 422 in the API, a
400 in the console), naming the first offending character.
"""

from __future__ import annotations

import re

UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
UNSAFE_LINES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
BIDI = "bidirectional override or isolate characters (U+202A to U+202E, U+2066 to U+2069)"
LINE_RULE = f"must not contain control characters (line breaks and tabs included) or {BIDI}"
LINES_RULE = f"must not contain control characters (other than tab and line breaks) or {BIDI}"


def unsafe_text_reason(value: str, *, multiline: bool = False) -> str | None:
    """None when `value` may be stored as free text; else why not (the rule, naming the
    first offending character as U+XXXX). `multiline`: a description, which may hold tab,
    line feed and carriage return; otherwise a name, one line without any control."""
    found = (UNSAFE_LINES if multiline else UNSAFE_LINE).search(value)
    if found is None:
        return None
    rule = LINES_RULE if multiline else LINE_RULE
    return f"{rule}; found U+{ord(found.group()):04X}"
