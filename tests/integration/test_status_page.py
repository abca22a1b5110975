"""The status page in a real headless Chromium (Debian's chromium, driven by Selenium through
Debian's chromedriver), against ``engram serve`` and the real workers: sign in, sync health and
queue depths, ingestions, a search with its explanations, a failure replayed, the entity view,
and a tenant key that sees its own tenant alone. Screenshots go to .engram-test/screenshots/
(wiped with the test data; never in the repo); their paths are printed at the end of the run."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from shared.settings import Settings
from tests.integration.screens import SCREENSHOTS
from tests.integration.served import serving
from tests.integration.support import KeyMaker, Workers, wait_until_finished

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")  # Debian's chromium-driver: Selenium Manager downloads nothing
NOTES = {
    "boston-trip": "Caroline: I went to the LGBTQ support group in Boston yesterday, it was powerful.",
    "melanie-reply": "Melanie: That's great, Caroline! Boston is lovely in spring.",
    "garden": "Melanie grows tomatoes and basil in her garden every summer.",
}


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1800"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def shot(browser: WebDriver, folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    assert browser.save_screenshot(str(path)), f"no screenshot written to {path}"
    SCREENSHOTS.append(path)
    print(f"screenshot: {path}")
    return path


def text_of(browser: WebDriver, css: str) -> str:
    return "\n".join(element.text for element in browser.find_elements(By.CSS_SELECTOR, css))


def ingestion_states(browser: WebDriver) -> dict[str, str]:
    """Each row of the recent ingestions: document id to state."""
    return {
        row.find_element(By.CSS_SELECTOR, ".document").text: row.find_element(By.CSS_SELECTOR, ".state").text
        for row in browser.find_elements(By.CSS_SELECTOR, "#recent tr.ingestion")
    }


def click(element: WebElement) -> None:
    element.click()


def wait_for(browser: WebDriver, check: str, timeout_s: float = 90, reload: bool = True) -> None:
    """Reloads the page until ``check`` (a CSS selector's text, `selector::text`) holds.

    A read that meets the page mid-navigation (a form just submitted) is tried again: an element
    of the page being left goes stale, and chromedriver may also answer 'unhandled inspector error:
    Cannot find context with specified id' for the document it was reading (a known race of
    chromedriver's, not the page's). Either is said in the failure if the check never holds."""
    css, _, wanted = check.partition("::")
    deadline = time.monotonic() + timeout_s
    error: WebDriverException | None = None
    while True:
        try:
            if wanted in text_of(browser, css):
                return
            error = None
        except WebDriverException as raised:  # StaleElementReferenceException among them
            error = raised
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{wanted!r} not in {css} after {timeout_s} s at {browser.current_url} (last read: {error}): "
                f"{browser.page_source[:3000]}"
            )
        time.sleep(1)
        if reload:
            browser.refresh()


def sign_in(browser: WebDriver, base: str, key: str) -> None:
    browser.delete_all_cookies()
    browser.get(base + "/ui")
    wait_for(browser, "#signin::API key", timeout_s=30)
    browser.find_element(By.ID, "key").send_keys(key)
    click(browser.find_element(By.ID, "signin-button"))
    wait_for(browser, "#who::Signed in as", timeout_s=30, reload=False)


def test_the_status_page_in_a_real_browser(
    browser: WebDriver, api: TestClient, workers: Workers, keys: KeyMaker, settings: Settings, tenant: str
) -> None:
    folder = settings.data_dir / "screenshots"
    other = f"{tenant}-other"
    # Given documents of a tenant, and one of another tenant
    answer = api.post(
        "/api/documents",
        json={"documents": [{"user_id": tenant, "id": k, "text": t} for k, t in NOTES.items()]},
    )
    assert answer.status_code == 202, answer.text
    assert (
        api.post(
            "/api/documents", json={"user_id": other, "id": "elsewhere", "text": "Nothing of Boston."}
        ).status_code
        == 202
    )
    wait_until_finished(api, tenant, list(NOTES))
    wait_until_finished(api, other, ["elsewhere"])
    # And a document whose write failed for good (Neo4j unreachable, no retry budget)
    workers.restart("write", ENGRAM_NEO4J_URI="bolt://127.0.0.1:9", ENGRAM_TASK_RETRY_BUDGET_S="0")
    try:
        failing = {
            "user_id": tenant,
            "id": "failed-note",
            "text": "Caroline plans a trip to Lisbon next May.",
        }
        assert api.post("/api/documents", json=failing).status_code == 202
        assert wait_until_finished(api, tenant, ["failed-note"])["failed-note"]["state"] == "failed"
    finally:
        workers.restart("write")

    admin, own = keys(None), keys(tenant)
    with serving(settings, {}, "test-status-page.log") as port:
        base = f"http://127.0.0.1:{port}"

        # When an admin signs in, the page shows sync health and queue depths
        sign_in(browser, base, admin.key)
        assert "redis up" in text_of(browser, "#health") and "neo4j up" in text_of(browser, "#health")
        assert "synced" in text_of(browser, "#vector-sync")
        queues = {
            cell.get_attribute("data-queue"): cell.text
            for cell in browser.find_elements(By.CSS_SELECTOR, "#queues td")
        }
        assert {"ingest", "embed", "write", "query", "reconcile"} <= set(queues) and all(
            v.isdigit() for v in queues.values()
        )
        # And the newest ingestions of every tenant, the failure with its reason
        assert "boston-trip" in text_of(browser, "#recent") and "elsewhere" in text_of(browser, "#recent")
        assert (
            "failed-note" in text_of(browser, "#failures")
            and "neo4j" in text_of(browser, "#failures").lower()
        )
        shot(browser, folder, "1-admin-overview")

        # When the admin picks the tenant and searches in the box
        browser.find_element(By.ID, "tenant").send_keys(tenant)
        click(browser.find_element(By.CSS_SELECTOR, "#tenant-picker button"))
        wait_for(browser, "#health::Memories", reload=False)
        assert "elsewhere" not in text_of(browser, "#recent")
        browser.find_element(By.ID, "q").send_keys("who went to the support group in Boston?")
        click(browser.find_element(By.ID, "search-button"))
        wait_for(browser, "#search-summary::results")  # a cold query worker's first answer may be late

        # Then the results show with their score explanations
        results = browser.find_elements(By.CSS_SELECTOR, "#results .result")
        assert results and "boston-trip" in results[0].text
        explanation = results[0].find_element(By.CSS_SELECTOR, ".explanation").text
        assert "similarity" in explanation and "score" in explanation
        shot(browser, folder, "2-search-with-explanations")

        # When the admin replays the failure (Neo4j is back)
        row = next(
            r
            for r in browser.find_elements(By.CSS_SELECTOR, "#failures tr.failure")
            if "failed-note" in r.text
        )
        click(row.find_element(By.CSS_SELECTOR, "button.replay"))

        # Then the page says it was re-sent, and the document ends done, its failure gone
        wait_for(browser, "#notice::failed-note: re-sent to the write stage", reload=False)
        shot(browser, folder, "3-replayed")
        wait_for(browser, "#failures::No failure.")
        deadline = time.monotonic() + 90
        while (states := ingestion_states(browser))["failed-note"] != "done" and time.monotonic() < deadline:
            time.sleep(1)
            browser.refresh()
        assert states["failed-note"] == "done" and states["boston-trip"] == "done", states

        # When the admin opens an entity, the entity view shows the memories naming it
        link = next(
            a for a in browser.find_elements(By.CSS_SELECTOR, "#entities li.entity a") if a.text == "Caroline"
        )
        click(link)
        wait_for(browser, "#entity h2::Caroline", reload=False)
        assert "support group in Boston" in text_of(browser, "#entity") and "Melanie" in text_of(
            browser, "#entity"
        )
        shot(browser, folder, "4-entity")

        # When the admin signs out, the page asks for a key again
        click(browser.find_element(By.ID, "signout"))
        wait_for(browser, "#signin::API key", reload=False)

        # When a wrong key is given, the form comes back saying so
        browser.find_element(By.ID, "key").send_keys("egk_0123456789abcdef_" + "A" * 43)
        click(browser.find_element(By.ID, "signin-button"))
        wait_for(browser, "#message::not a live Engram API key", reload=False)

        # When the tenant's own key signs in, it sees its tenant alone, and no queue depths
        sign_in(browser, base, own.key)
        assert "boston-trip" in text_of(browser, "#recent") and "elsewhere" not in text_of(browser, "#recent")
        assert other not in browser.page_source and not browser.find_elements(By.ID, "queues")
        shot(browser, folder, "5-tenant-view")
        browser.get(f"{base}/ui?tenant={other}")
        assert "not for that tenant" in text_of(browser, "#message")

        # And the cookie the browser holds is HttpOnly, SameSite=Strict, for /ui alone
        cookie = next(c for c in browser.get_cookies() if c["name"] == "engram_ui")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
        assert own.key not in cookie["value"]
    assert all(path.stat().st_size > 0 for path in SCREENSHOTS)
