"""The status page over HTTP (the browser's own run is test_status_page.py): sign-in and its
cookie, CSRF refusals, tenant scoping, escaping, against the real app, Redis, Neo4j and workers."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from producers.client import EngramClient
from producers.http import app as api_module
from producers.http import deps
from producers.http.ui.page import SECURITY_HEADERS
from producers.http.ui.session import COOKIE
from shared.models import utc_now
from shared.settings import Settings
from tests.integration import log_secrets
from tests.integration.support import APP_URL, KeyMaker, wait_until_finished

pytestmark = pytest.mark.integration

ORIGIN = {"Origin": APP_URL}
HOSTILE_ID = '<script>alert("id")</script>'
HOSTILE_TEXT = "<img src=x onerror=alert(1)> Caroline met Melanie in Boston to talk about hostile markup."


@pytest.fixture
def page(api: TestClient) -> Iterator[TestClient]:
    """A browser's view of the app: no API-key header, its own cookies, redirects not followed.
    Not entered as a context, so the app's lifespan (and its shared clients) stays the api's."""
    client = TestClient(api_module.app, base_url=APP_URL, follow_redirects=False)
    yield client
    client.close()


def sign_in(page: TestClient, key: str) -> str:
    """Signs in; returns the page's CSRF token."""
    answer = page.post("/ui/signin", data={"key": key}, headers=ORIGIN)
    assert answer.status_code == 303, answer.text
    log_secrets.remember(page.cookies.get(COOKIE))
    shown = page.get("/ui")
    assert shown.status_code == 200 and "Sign out" in shown.text
    found = re.search(r'name="csrf" value="([^"]+)"', shown.text)
    assert found is not None
    return found.group(1)


def searched(page: TestClient, params: dict[str, str], timeout_s: float = 90) -> httpx.Response:
    """The page with a search's results: asked again while the query worker is still cold (its
    first search loads the model, past the search timeout on a busy machine)."""
    deadline = time.monotonic() + timeout_s
    while True:
        shown = page.get("/ui", params=params)
        if "no query worker answered" not in shown.text or time.monotonic() > deadline:
            return shown
        time.sleep(1)


def test_sign_in_answers_a_signed_cookie_of_strict_flags_never_the_key(
    page: TestClient, keys: KeyMaker
) -> None:
    # Given no cookie, the page is the sign-in form, with the security headers
    form = page.get("/ui")
    assert form.status_code == 200 and 'action="/ui/signin"' in form.text
    for name, value in SECURITY_HEADERS.items():
        assert form.headers[name] == value
    assert "default-src 'self'" in form.headers["content-security-policy"]

    # When an admin key signs in from the page's own origin
    admin = keys(None)
    answer = page.post("/ui/signin", data={"key": admin.key}, headers=ORIGIN)

    # Then the answer is a redirect to /ui with an HttpOnly, SameSite=Strict, Path=/ui cookie
    assert answer.status_code == 303 and answer.headers["location"] == "/ui"
    cookie = answer.headers["set-cookie"]
    flags = {part.strip().split("=")[0].lower(): part.strip() for part in cookie.split(";")}
    assert cookie.startswith(f"{COOKIE}=")
    assert "httponly" in flags and flags["samesite"].lower() == "samesite=strict"
    assert flags["path"] == "Path=/ui" and int(flags["max-age"].split("=")[1]) > 0
    # And the cookie holds neither the key nor its secret part
    secret = admin.key.split("_", 2)[2]  # egk_<id>_<secret>: the secret itself may hold "_"
    assert admin.key not in cookie and secret not in cookie
    shown = page.get("/ui")
    assert shown.status_code == 200 and "Signed in as" in shown.text and "Queue depths" in shown.text


def test_a_wrong_key_gets_the_form_again_and_nothing_else(page: TestClient, keys: KeyMaker) -> None:
    real = keys(None).key
    for wrong in ("egk_0123456789abcdef_" + "A" * 43, real[:-1] + ("A" if real[-1] != "A" else "B"), ""):
        answer = page.post("/ui/signin", data={"key": wrong}, headers=ORIGIN)
        assert answer.status_code == 401
        assert "not a live Engram API key" in answer.text and 'action="/ui/signin"' in answer.text
        assert "set-cookie" not in answer.headers
    assert "Sign out" not in page.get("/ui").text
    # A form of more fields than any of the page's is read as no form: the same 401, never a 500
    crowded = page.post("/ui/signin", data={f"f{i}": "x" for i in range(30)} | {"key": real}, headers=ORIGIN)
    assert crowded.status_code == 401 and "set-cookie" not in crowded.headers


def test_posts_from_elsewhere_are_refused(page: TestClient, keys: KeyMaker, tenant: str) -> None:
    admin = keys(None).key
    # A sign-in posted by another site's page (or with no origin at all) sets no cookie
    for headers in ({"Origin": "http://evil.example"}, {}, {"Referer": "http://evil.example/x"}):
        answer = page.post("/ui/signin", data={"key": admin}, headers=headers)
        assert answer.status_code == 403 and "set-cookie" not in answer.headers

    # Signed in: a replay or sign-out without the page's CSRF token, or from another origin, is refused
    csrf = sign_in(page, admin)
    fields = {"user_id": tenant, "document_id": "any"}
    refused = [
        page.post("/ui/replay", data=fields, headers=ORIGIN),
        page.post("/ui/replay", data={**fields, "csrf": "forged"}, headers=ORIGIN),
        page.post("/ui/replay", data={**fields, "csrf": csrf}, headers={"Origin": "http://evil.example"}),
        page.post("/ui/signout", data={"csrf": "forged"}, headers=ORIGIN),
    ]
    assert [answer.status_code for answer in refused] == [403, 403, 403, 403]
    assert "Sign out" in page.get("/ui").text  # still signed in

    # And the page's own sign-out ends the session
    out = page.post("/ui/signout", data={"csrf": csrf}, headers=ORIGIN)
    assert out.status_code == 303 and f'{COOKIE}=""' in out.headers["set-cookie"]
    assert "Sign out" not in page.get("/ui").text


def test_hostile_ids_and_texts_render_as_text(
    api: TestClient, page: TestClient, keys: KeyMaker, tenant: str
) -> None:
    # Given a document whose id and text are markup
    answer = api.post("/api/documents", json={"user_id": tenant, "id": HOSTILE_ID, "text": HOSTILE_TEXT})
    assert answer.status_code == 202, answer.text
    wait_until_finished(api, tenant, [HOSTILE_ID])

    # When an admin looks at the tenant and searches it
    sign_in(page, keys(None).key)
    shown = searched(page, {"tenant": tenant, "q": "Caroline Boston hostile markup"})

    # Then the id and the text are shown, escaped: no tag of theirs reaches the page
    assert shown.status_code == 200
    assert HOSTILE_ID not in shown.text and "<img src=x" not in shown.text
    assert "&lt;script&gt;alert(&#34;id&#34;)&lt;/script&gt;" in shown.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown.text  # in the search result's text
    assert 'class="explanation"' in shown.text
    # And a notice in the URL that the server did not sign is not shown at all
    notice = page.get("/ui", params={"notice": "<b>Call 555-0100 to restore your account</b>"})
    assert notice.status_code == 200 and "555-0100" not in notice.text and 'id="notice"' not in notice.text


def test_a_tenant_key_sees_its_own_tenant_alone(
    api: TestClient, page: TestClient, keys: KeyMaker, tenant: str, settings: Settings
) -> None:
    # Given documents of two tenants
    other = f"{tenant}-other"
    for user, doc in ((tenant, "mine-1"), (other, "theirs-1")):
        answer = api.post(
            "/api/documents", json={"user_id": user, "id": doc, "text": f"Notes of {user} on Boston."}
        )
        assert answer.status_code == 202
        wait_until_finished(api, user, [doc])

    # When the tenant's key signs in
    own = keys(tenant)
    csrf = sign_in(page, own.key)
    shown = page.get("/ui")

    # Then it sees its own ingestions, neither the other tenant's nor the store's queues
    assert "mine-1" in shown.text and "theirs-1" not in shown.text and other not in shown.text
    assert "Queue depths" not in shown.text
    # And its entity view: an entity it names, none of a name without letters
    entity = page.get("/ui/entities/Boston")
    assert entity.status_code == 200 and "Notes of" in entity.text and other not in entity.text
    assert page.get("/ui/entities/---").status_code == 404
    # And naming the other tenant, or replaying its document, is refused
    assert page.get("/ui", params={"tenant": other}).status_code == 403
    assert page.get(f"/ui/entities/Boston?tenant={other}").status_code == 403
    replay = page.post(
        "/ui/replay", data={"csrf": csrf, "user_id": other, "document_id": "theirs-1"}, headers=ORIGIN
    )
    assert replay.status_code == 403

    # And once the key is revoked, its sign-in ends
    client = EngramClient(settings)
    try:
        assert own.info.id and client.key_store().revoke_key(own.info.id, utc_now())
    finally:
        client.close()
    deps.authenticator().forget()
    assert "Sign out" not in page.get("/ui").text


# Issue 25: the status page and the sign-in, as an attacker tried them ---------------------------


def test_a_signed_out_cookie_is_dead_at_once(page: TestClient, keys: KeyMaker) -> None:
    # Given a signed-in page, and its cookie kept aside (a copy stolen, a second tab)
    csrf = sign_in(page, keys(None).key)
    kept = page.cookies.get(COOKIE)
    assert kept

    # When it signs out
    out = page.post("/ui/signout", data={"csrf": csrf}, headers=ORIGIN)
    assert out.status_code == 303

    # Then the kept cookie signs nothing in, though its 8 hours are not over
    page.cookies.set(COOKIE, kept, path="/ui")
    shown = page.get("/ui")
    assert shown.status_code == 200 and "Sign out" not in shown.text and 'action="/ui/signin"' in shown.text


def test_repeated_failed_sign_ins_meet_a_429_and_then_no_key_is_checked(
    page: TestClient, keys: KeyMaker, settings: Settings
) -> None:
    real = keys(None).key
    bound = settings.auth_failures_per_key
    guess = real[:-4] + "AAAA"  # the real key id, a guessed secret
    answers = [
        page.post("/ui/signin", data={"key": guess}, headers=ORIGIN).status_code for _ in range(bound + 1)
    ]
    assert answers[:bound] == [401] * bound and answers[bound] == 429
    # The key id is held off even with the right secret, until the window ends
    late = page.post("/ui/signin", data={"key": real}, headers=ORIGIN)
    assert late.status_code == 429 and int(late.headers["retry-after"]) >= 1
    assert "set-cookie" not in late.headers


def _scans(redis_client: Any) -> int:
    stats = redis_client.info("commandstats")
    return int(stats.get("cmdstat_scan", {}).get("calls", 0))


def test_a_status_page_load_reads_failures_from_an_index_not_a_scan(
    api: TestClient, page: TestClient, keys: KeyMaker, tenant: str, redis_client: Any
) -> None:
    # Given a tenant with a document, signed in with its key
    answer = api.post("/api/documents", json={"user_id": tenant, "id": "scan-1", "text": "Notes on Boston."})
    assert answer.status_code == 202
    wait_until_finished(api, tenant, ["scan-1"])
    sign_in(page, keys(tenant).key)

    # When the page is loaded again and again
    before = _scans(redis_client)
    for _ in range(5):
        assert page.get("/ui").status_code == 200

    # Then no load scanned the progress records of every tenant
    assert _scans(redis_client) == before
