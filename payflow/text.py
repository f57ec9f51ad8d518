"""The one rule for free text a merchant names (a webhook endpoint's description, an API
key's name, a payment's description): no control characters and no bidirectional
overrides or isolates.

C0 controls (U+0000 to U+001F, line breaks and tabs included), DEL and C1 controls
(U+007F to U+009F) are not text a person reads, and terminals, logs and CSV exports act
on them; the bidi overrides and isolates (U+202A to U+202E, U+2066 to U+2069) reorder what
follows them, so `invoice<U+202E>gnp.exe` displays as something it is not (the "Trojan
Source" spoofing). Each caller refuses such text with its own error (a 422 in the API, a
400 in the console), naming the first offending character.
"""

from __future__ import annotations

import re

UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
FREE_TEXT_RULE = (
    "must not contain control characters (line breaks and tabs included) or bidirectional"
    " override or isolate characters (U+202A to U+202E, U+2066 to U+2069)"
)


def unsafe_text_reason(value: str) -> str | None:
    """None when `value` may be stored as free text; else why not (`FREE_TEXT_RULE`,
    naming the first offending character as U+XXXX)."""
    found = UNSAFE_TEXT.search(value)
    if found is None:
        return None
    return f"{FREE_TEXT_RULE}; found U+{ord(found.group()):04X}"
