"""A worker that serves searches alone drops the broker's ack bookkeeping and keeps results briefly."""

from __future__ import annotations

from workers.app import make_app
from workers.query import SEARCH_RESULT_TTL_S, _serve_searches_lightly, serves_searches_alone


def test_only_a_worker_of_the_query_queue_alone_serves_searches_alone() -> None:
    assert serves_searches_alone(["query"])
    assert serves_searches_alone("query")
    assert not serves_searches_alone("query,ingest")
    assert not serves_searches_alone(["ingest", "query"])
    assert not serves_searches_alone(None)  # no -Q: every queue


def test_a_query_worker_drops_ack_emulation_and_keeps_results_a_minute() -> None:
    conf = make_app().conf
    _serve_searches_lightly(conf=conf, options={"queues": ["query"]})
    assert conf.broker_transport_options["ack_emulation"] is False
    assert conf.broker_transport_options["visibility_timeout"]  # the rest kept
    assert conf.result_expires == SEARCH_RESULT_TTL_S


def test_a_worker_of_other_queues_keeps_both() -> None:
    conf = make_app().conf
    _serve_searches_lightly(conf=conf, options={"queues": ["query", "write"]})
    assert "ack_emulation" not in conf.broker_transport_options
    assert conf.result_expires == 3600
