"""The SDK's retry against the served app's own "not now": an app process holding as many waiting
searches as it may (ENGRAM_API_MAX_PENDING_SEARCHES=1 here) answers 503 with ``Retry-After: 1``;
the SDK waits that second and tries again, and gets the answer once the search ahead of it is done."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from producers.sdk import EngramHTTP
from shared.models import SearchResponse
from shared.retry import HttpRetry
from shared.settings import Settings
from tests.integration.served import engram_serving
from tests.integration.support import KeyMaker, Workers

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def busy_app(settings: Settings, workers: Workers) -> Iterator[str]:
    port = settings.api_port
    log = settings.data_dir / "logs" / "test-http-client-retry.log"
    args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    env = {"ENGRAM_API_MAX_PENDING_SEARCHES": "1", "ENGRAM_SEARCH_TIMEOUT_S": "60"}
    with engram_serving(args, port, log, "/healthz", **env) as base:
        yield base


def test_a_503_with_retry_after_from_the_app_is_waited_out_and_retried(
    busy_app: str, workers: Workers, keys: KeyMaker, tenant: str
) -> None:
    key = keys(tenant).key
    ahead: list[SearchResponse | BaseException] = []

    def search_ahead() -> None:
        try:
            with EngramHTTP(busy_app, key) as first:
                ahead.append(first.search("anything at all"))
        except BaseException as exc:
            ahead.append(exc)

    slept: list[float] = []

    def pause(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:
            workers.start("query")  # the search ahead is answered now; then this one may pass
        time.sleep(seconds)

    workers.stop("query")  # no answers: the first search waits, holding the app's one place
    try:
        thread = threading.Thread(target=search_ahead)
        thread.start()
        time.sleep(2)  # it is waiting in the app
        assert thread.is_alive()
        with EngramHTTP(busy_app, key, retry=HttpRetry(attempts=20), sleep=pause) as second:
            answer = second.search("anything else")
        thread.join(timeout=60)
    finally:
        workers.start("query")

    assert isinstance(answer, SearchResponse) and answer.query == "anything else"
    assert len(ahead) == 1 and isinstance(ahead[0], SearchResponse)
    assert slept and all(delay == 1.0 for delay in slept)  # what the app's Retry-After asked
