"""The SSRF guard judges a non-ASCII host as the IDNA form (NFKC-folded) the resolver is
asked for, not as typed: fullwidth digits or letters that name a loopback literal or
`localhost` do not pass the accept-time check as "a DNS name"."""

from __future__ import annotations

import pytest

from payflow.webhooks.ssrf import UnsafeWebhookUrl, check_webhook_url


@pytest.mark.parametrize(
    "url",
    [
        "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/hook",  # fullwidth 127.0.0.1
        "http://127.0.0.\uff11/hook",
        "http://\uff11\uff16\uff19.\uff12\uff15\uff14.\uff11\uff16\uff19.\uff12\uff15\uff14/latest/meta-data",
        "http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/hook",
        "http://hooks.\uff49\uff4e\uff54\uff45\uff52\uff4e\uff41\uff4c/hook",
        "http://\uff11\uff10.0.0.1/hook",
    ],
)
def test_a_unicode_host_is_judged_as_the_name_the_resolver_gets(url: str) -> None:
    with pytest.raises(UnsafeWebhookUrl):
        check_webhook_url(url, ())


def test_an_internationalised_public_name_is_still_accepted() -> None:
    assert check_webhook_url("https://bücher.example/hook", ()) == "xn--bcher-kva.example"
