"""A task's soft time limit met inside a Qdrant request stops the task (to be retried); it is not
taken for an outage of Qdrant, which the write stage records for the reconciler and goes on."""

from __future__ import annotations

import httpx
import pytest
from celery.exceptions import SoftTimeLimitExceeded
from qdrant_client.http.exceptions import ResponseHandlingException

from shared.errors import ServiceUnavailable
from shared.stores.qdrant_payload import translated_errors


def test_a_soft_time_limit_qdrant_client_wrapped_stops_the_task() -> None:
    # Given qdrant-client wrapping what its request raised: the task's soft time limit
    with pytest.raises(SoftTimeLimitExceeded), translated_errors("ensure collection"):
        raise ResponseHandlingException(SoftTimeLimitExceeded())


def test_a_soft_time_limit_under_an_http_error_stops_the_task_too() -> None:
    with pytest.raises(SoftTimeLimitExceeded), translated_errors("upsert"):
        try:
            raise SoftTimeLimitExceeded()
        except SoftTimeLimitExceeded as limit:
            raise httpx.ReadError("read interrupted") from limit


def test_an_outage_is_still_an_outage() -> None:
    with pytest.raises(ServiceUnavailable), translated_errors("upsert"):
        raise ResponseHandlingException(httpx.ConnectError("connection refused"))
