"""The operator web console served by the API role (docs/console.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from payflow.config.base import Slice


class ConsoleSettings(Slice):
    """The `console` slice (`settings.console`); the module's docstring says what it covers."""

    slice_name = "console"

    console_enabled: bool = True
    """Serve the web console under `/console` from the API role (docs/console.md)."""
    # Signs the session cookie; empty: derived from PROVIDER_WEBHOOK_SECRET (same on every replica).
    console_secret: SecretStr | None = Field(default=None, min_length=32)
    """Key (32+ characters) that signs the console's session cookie; unset: derived from
    `PROVIDER_WEBHOOK_SECRET` (the same on every replica)."""
    console_session_ttl_s: float = Field(default=8 * 3600.0, ge=60, le=30 * 86400)
    """Lifetime of a console session (8 h by default): the cookie's Max-Age and the server-side
    `expires_at`."""
    # auto: Secure when the request came over HTTPS (or X-Forwarded-Proto: https).
    console_cookie_secure: Literal["auto", "always", "never"] = "auto"
    """`Secure` flag of console cookies: `auto` behind HTTPS (https scheme or `X-Forwarded-Proto:
    https`), `always` or `never`."""
    console_signin_max_failures: int = Field(default=5, ge=1, le=1000)
    """Failed console sign-ins allowed per client address per CONSOLE_SIGNIN_WINDOW_S (counted in
    Redis); beyond, sign-in answers 429."""
    console_signin_window_s: int = Field(default=300, ge=10, le=86400)
    """Window in which CONSOLE_SIGNIN_MAX_FAILURES failed console sign-ins are counted."""
    console_page_size: int = Field(default=50, ge=5, le=500)
    """Rows per page in the console's lists."""
