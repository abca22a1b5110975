"""The served app (``engram serve``) validating a costly body (issue 15, finding 1): a batch of
the largest size whose every document is costly to validate is validated off the event loop, so
``/healthz`` answers meanwhile in a fraction of the batch's time. Loopback, one batch."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from shared.settings import Settings
from tests.integration.served import serving
from tests.integration.support import KeyMaker, Workers

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(settings: Settings, workers: Workers) -> Iterator[int]:
    # The default read timeouts, but room for the 64 MB body on a busy machine
    with serving(settings, {"ENGRAM_API_BODY_TIMEOUT_S": "120"}, "test-api-validation.log") as port:
        yield port


def test_healthz_answers_while_a_costly_batch_of_the_largest_size_is_validated(
    served: int, settings: Settings, keys: KeyMaker, tenant: str
) -> None:
    # Given a batch of ENGRAM_MAX_BATCH_DOCUMENTS documents filling ENGRAM_MAX_REQUEST_BYTES, each
    # text white space but its last character (so checked character by character), and the last
    # document invalid (so it is all validated, then refused: nothing stored)
    count = settings.max_batch_documents
    text = " " * ((settings.max_request_bytes - 100_000) // count - 40) + "x"
    documents = [{"text": text}] * (count - 1) + [{"text": text, "not_a_field": 1}]
    body = json.dumps({"documents": documents}).encode()
    assert settings.max_request_bytes - 200_000 < len(body) <= settings.max_request_bytes
    url = f"http://127.0.0.1:{served}"
    answer: list[httpx.Response] = []

    def post() -> None:
        answer.append(
            httpx.post(
                f"{url}/api/documents",
                content=body,
                headers={"content-type": "application/json", "Authorization": f"Bearer {keys(tenant).key}"},
                timeout=300,
            )
        )

    # When it is posted, and /healthz asked again and again while it is handled
    poster = threading.Thread(target=post)
    started = time.monotonic()
    poster.start()
    waits: list[float] = []
    while poster.is_alive():  # each asked while the batch is handled counts, to its answer
        asked = time.monotonic()
        health = httpx.get(f"{url}/healthz", timeout=300)
        waits.append(time.monotonic() - asked)
        assert health.status_code in (200, 503)
        time.sleep(0.1)
    poster.join()
    batch_s = time.monotonic() - started

    # Then the batch is refused for its last document
    assert answer[0].status_code == 422, answer[0].text[:300]
    assert "not_a_field" in answer[0].text
    # And /healthz answered all along, each time in a fraction of the batch's time
    print(f"batch {batch_s:.2f} s; /healthz {len(waits)} times, at most {max(waits, default=0):.2f} s")
    assert len(waits) >= 3, (batch_s, waits)
    assert max(waits) < batch_s / 4, (batch_s, waits)
