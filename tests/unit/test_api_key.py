"""One way to read an API key (``producers.http.auth.api_key_of``), as the HTTP app's guard, its
``/healthz`` and MCP over HTTP all read it: ``Authorization: Bearer`` (the scheme in any case) or
``X-API-Key``; both at once is refused, never a guess at which one counts."""

from __future__ import annotations

import pytest

from producers.http.auth import Ambiguous, api_key_of
from shared.errors import Unauthenticated


@pytest.mark.parametrize(
    ("headers", "key"),
    [
        ({"authorization": "Bearer egk_a"}, "egk_a"),
        ({"authorization": "bearer egk_a"}, "egk_a"),
        ({"authorization": "BEARER egk_a"}, "egk_a"),
        ({"x-api-key": "egk_b"}, "egk_b"),
    ],
)
def test_a_key_is_read_from_a_bearer_authorization_or_from_x_api_key(
    headers: dict[str, str], key: str
) -> None:
    # Given a request naming its key one way; When it is read; Then that key is the one found
    assert api_key_of(headers) == key


def test_both_headers_at_once_are_ambiguous_whichever_would_have_won() -> None:
    # Given a key in each header (a proxy may read one and the app the other)
    headers = {"authorization": "Bearer egk_a", "x-api-key": "egk_b"}
    # When it is read; Then neither is taken
    with pytest.raises(Ambiguous):
        api_key_of(headers)


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Basic dXNlcjpwdw=="}, {"authorization": "Bearer"}, {"authorization": "Bearer "}],
)
def test_no_key_or_another_scheme_is_no_key(headers: dict[str, str]) -> None:
    # Given no header, another scheme, or a Bearer without its key; Then no key is read
    with pytest.raises(Unauthenticated):
        api_key_of(headers)
