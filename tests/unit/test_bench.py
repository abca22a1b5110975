"""engram bench's pure parts: Debian's stanzas, the corpus texts, percentiles, tenants, the
estimate, the targets' verdicts."""

from __future__ import annotations

from collections import Counter
from typing import Any

from producers.bench import corpus, estimate, report, run, throughput
from producers.bench.run import skipped
from producers.bench.stats import Latency, percentile

DUMP = """Package: 0ad
Version: 0.0.26-3
Description: Real-time strategy game of ancient warfare
Tag: game::strategy,
 x11::application

Package: zsh
Description: shell with lots of features
"""
TRANSLATION = """Package: 0ad
Description-md5: d943
Description-en: Real-time strategy game of ancient warfare
 0 A.D. is a free real-time strategy game
 of ancient warfare.
 .
 The project is highly ambitious.
"""


def test_stanzas_join_continuation_lines() -> None:
    stanzas = list(corpus._stanzas(DUMP))
    assert [s["Package"] for s in stanzas] == ["0ad", "zsh"]
    assert stanzas[0]["Tag"] == "game::strategy,\nx11::application"
    body = next(corpus._stanzas(TRANSLATION))["Description-en"]
    assert body.split("\n")[1:] == [
        "0 A.D. is a free real-time strategy game",
        "of ancient warfare.",
        ".",
        "The project is highly ambitious.",
    ]


def test_debian_texts_whole_or_by_paragraph() -> None:
    packages = {"0ad": ("Real-time strategy game", "A free game.\n\nHighly ambitious."), "zsh": ("shell", "")}
    whole = corpus.debian_texts(packages, by_paragraph=False)
    assert [t.text for t in whole] == [
        "0ad: Real-time strategy game.\n\nA free game.\n\nHighly ambitious.",
        "zsh: shell.",
    ]
    split = corpus.debian_texts(packages, by_paragraph=True)
    assert [t.text for t in split] == [
        "0ad: Real-time strategy game.",
        "0ad: A free game.",
        "0ad: Highly ambitious.",
        "zsh: shell.",
    ]
    assert len({t.id for t in split}) == len(split)


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.95), percentile(values, 0.99)) == (50, 95, 99)
    latency = Latency.of([0.010, 0.020, 0.030])
    assert (latency.n, latency.p50_ms, latency.max_ms) == (3, 20.0, 30.0)


def test_tenants_take_their_share_of_the_store() -> None:
    shares = Counter(run._tenant("b", i).split("-")[1] for i in range(10_000))
    assert shares == {"p1": 100, "p10": 1000, "p50": 5000, "rest": 3900}


def test_estimate_grows_with_size_and_load() -> None:
    small = estimate.phases([1000], 100, 5, set(), own_stack=False)
    large = estimate.phases([1000, 100_000], 100, 5, set(), own_stack=True)
    assert sum(s for _, s in large) > sum(s for _, s in small)
    assert not any("fallback" in label for label, _ in small)  # Neo4j is stopped on its own stack only
    quiet, busy = estimate.say_plan(small, 1.0, 2), estimate.say_plan(small, 8.0, 2)
    assert "x1.0" in quiet[0] and "x4.0" in busy[0]


def _result(p50: float, p99: float, floor: float, ratio: float) -> dict[str, Any]:
    size = {
        "floor_p50_ms": floor,
        "p50_ms": p50,
        "p99_ms": p99,
        "ratio_p50": p50 / floor,
        "vector_ratio_p50": 1.1,
    }
    return {"ingest": {"ratio": ratio}, "search": {"1000": dict(size), "100000": dict(size)}}


def test_targets_pass_and_miss_by_their_bounds() -> None:
    verdicts = {t.name: t.verdict for t in report.targets(_result(30.0, 90.0, 25.0, 0.95))}
    assert verdicts["ingestion / raw embedder"] == "PASS"
    assert verdicts["default p50 / floor"] == "PASS"
    assert verdicts["default p99 ms"] == "PASS"
    assert verdicts["recall@10 at the search's k"] == "NOT MEASURED"
    missed = {t.name: t.verdict for t in report.targets(_result(60.0, 100.0, 25.0, 0.5))}
    assert missed["ingestion / raw embedder"] == "MISS"
    assert missed["default p50 / floor"] == "MISS"
    assert missed["default p99 ms"] == "MISS"  # strictly under 100 ms


def test_the_fallback_and_instant_are_skipped_when_asked_and_always_on_a_running_stack() -> None:
    assert skipped({"fallback", "rss"}, own=True) == {"fallback", "rss"}
    assert skipped({"rss"}, own=True) == {"rss"}
    assert skipped({"instant"}, own=True) == {"instant"}
    assert skipped({"rss"}, own=False) == {"fallback", "instant", "rss"}


def test_the_stack_cpu_outside_the_model_is_the_stacks_less_the_raw_embedders() -> None:
    # Given two sizes: 1,000 chunks for 30 CPU-s of the stack with the model at 16 ms a chunk
    # alone, then 3,000 chunks for 75 CPU-s with the model at 14 ms
    steps = [
        {
            "chunks": 1000,
            "cpu_s": {"neo4j": 10.0, "worker embed": 20.0},
            "raw_cpu_ms_per_chunk": 16.0,
            "raw": {"cpu_s": 32.0, "chunks": 2000},
        },
        {
            "chunks": 3000,
            "cpu_s": {"neo4j": 30.0, "worker embed": 45.0},
            "raw_cpu_ms_per_chunk": 14.0,
            "raw": {"cpu_s": 28.0, "chunks": 2000},
        },
    ]
    # Then the model's share is taken out size by size: (105,000 - 16,000 - 42,000) ms / 4,000
    assert run._stack_cpu(steps) == {"raw_cpu_ms_per_chunk": 15.0, "stack_cpu_ms_per_chunk": 11.75}


def test_a_search_costs_each_process_its_share_of_the_cpu_spent_over_every_search_sent() -> None:
    # Given 90 answered and 10 failed searches, for which Neo4j spent 3.3 CPU-s, the query worker
    # 3.4, the API 1.1, Redis 0.2 and an idle Flower nothing
    spent = {"neo4j": 3.3, "worker query": 3.4, "api": 1.1, "redis": 0.2, "flower": 0.0}
    level = {"clients": 8, "searches": 90, "failed": 10, "per_s": 22.0, "latency": None}

    figures = throughput.cpu_per_search(spent, level)

    # Then each search cost each of them its share, milliseconds, and 80 ms in all
    assert figures["cpu_ms_per_search"] == {"neo4j": 33.0, "worker query": 34.0, "api": 11.0, "redis": 2.0}
    assert figures["stack_cpu_ms_per_search"] == 80.0
    # And the report says it beside the level, the largest first
    assert report.cpu_split({**level, **figures}) == "80 ms: worker query 34, neo4j 33, api 11, redis 2"


def test_the_stub_tei_server_answers_unit_vectors_of_its_dimension() -> None:
    import httpx
    import numpy as np

    from producers.bench.instant import StubTei

    with StubTei(8) as stub:
        answer = httpx.post(f"{stub.url}/embed", json={"inputs": ["a", "b", "a"]}).json()
        refused = httpx.post(f"{stub.url}/embed", json={"texts": ["a"]})
    vectors = np.asarray(answer)
    assert vectors.shape == (3, 8)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (vectors[0] == vectors[2]).all() and not (vectors[0] == vectors[1]).all()
    assert refused.status_code == 422 and stub.texts == 3


def test_the_new_ingest_targets_judge_the_stack_cpu_and_the_instant_rate() -> None:
    result = _result(30.0, 90.0, 25.0, 0.95)
    result["ingest"].update(stack_cpu_ms_per_chunk=3.5, instant_embedder_chunks_per_s=420.0)
    verdicts = {t.name: t.verdict for t in report.targets(result)}
    assert verdicts["stack CPU-ms a chunk outside the model"] == "PASS"
    assert verdicts["instant embedder chunks/s"] == "PASS"
    result["ingest"].update(stack_cpu_ms_per_chunk=12.0, instant_embedder_chunks_per_s=170.0)
    verdicts = {t.name: t.verdict for t in report.targets(result)}
    assert verdicts["stack CPU-ms a chunk outside the model"] == "MISS"
    assert verdicts["instant embedder chunks/s"] == "MISS"


def test_the_targets_are_issue_28s_with_the_tenants_and_throughput_judged() -> None:
    # Given a run at 100k: default p50 1.9x its 20 ms floor, vector 1.4x, ingestion 0.82x the raw
    # embedder, the slowest tenant 38 ms, 8 clients at 52 searches/s with p99 280 ms
    result = _result(38.0, 90.0, 20.0, 0.82)
    result["search"]["100000"]["vector_ratio_p50"] = 1.4
    result["tenants"] = {
        share: {"p50_ms": ms, "complete": True} for share, ms in [("1%", 30.0), ("10%", 38.0)]
    }
    level = {"clients": 8, "per_s": 52.0, "failed": 0, "latency": {"p99_ms": 280.0}}
    result["throughput"] = [{**level, "clients": 1, "per_s": 15.0}, level]

    verdicts = {t.name: t.verdict for t in report.targets(result)}

    # Then each passes by the issue's bound
    for name in (
        "ingestion / raw embedder",
        "default p50 / floor",
        "vector p50 / floor",
        "tenants' p50 / floor, the slowest",
        "HTTP searches/s, 8 clients",
        "HTTP p99 ms, 8 clients",
    ):
        assert verdicts[name] == "PASS", name

    # And a slower tenant, fewer searches a second or a slower tail misses
    result["tenants"]["10%"]["p50_ms"] = 41.0
    level.update(per_s=49.0, latency={"p99_ms": 300.0})
    verdicts = {t.name: t.verdict for t in report.targets(result)}
    assert verdicts["tenants' p50 / floor, the slowest"] == "MISS"
    assert verdicts["HTTP searches/s, 8 clients"] == "MISS"
    assert verdicts["HTTP p99 ms, 8 clients"] == "MISS"  # strictly under 300 ms


class _RestartedStack:
    """A stack that records the settings its workers were restarted with."""

    class settings:  # what the phase reads of the stack's settings
        data_dir = None

    def __init__(self) -> None:
        self.restarts: list[dict[str, str]] = []

    def restart_services(self, extra: dict[str, str]) -> None:
        self.restarts.append(extra)


def _instant_restarts(monkeypatch: Any, keep: bool, skip: set[str]) -> list[dict[str, str]]:
    def measure(client: Any, data_dir: Any, documents: Any, dimension: int, restart: Any, *_: Any) -> Any:
        restart({"ENGRAM_EMBEDDING_BACKEND": "tei"})  # onto the stub, then back "whatever happened"
        restart({})
        return {"chunks_per_s": 1.0}

    monkeypatch.setattr(run.instant, "measure", measure)
    stack = _RestartedStack()
    container = type("C", (), {"embedder": type("E", (), {"dimension": 4})()})()
    args = type("A", (), {"keep": keep, "timeout": 1.0})()
    run._instant(args, stack, None, container, [], "p", {"ingest": {}}, skip)  # type: ignore[arg-type]
    return stack.restarts


def test_after_the_instant_phase_the_workers_are_put_back_when_a_phase_follows(monkeypatch: Any) -> None:
    # The fallback phase searches (its queries are embedded): it must not meet the stopped stub
    stub = {"ENGRAM_EMBEDDING_BACKEND": "tei"}
    assert _instant_restarts(monkeypatch, keep=False, skip=set()) == [stub, {}]
    assert _instant_restarts(monkeypatch, keep=True, skip={"fallback"}) == [stub, {}]
    # Nothing follows and the stack is torn down next: no restart for nothing
    assert _instant_restarts(monkeypatch, keep=False, skip={"fallback"}) == [stub]


def test_write_to_searchable_prints_its_rounds_in_order_so_a_slow_first_one_shows() -> None:
    # Given 20 rounds whose first two waited behind something (1.1 s and 0.23 s) and the rest ~90 ms
    rounds = [1106.0, 234.0, *[90.0 + i for i in range(18)]]
    phase = {**Latency.of([ms / 1000 for ms in rounds]).as_dict(), "searches": 84, "rounds_ms": rounds}
    text = report.searchable_line(phase)

    # Then the table gives the p95 of all of them (the target's) and the first rounds beside it
    assert "p95 1106 ms" not in text and "p95 234 ms" in text
    assert "first rounds 1106, 234, 90 ms; p95 of the 17 after the first 3 107 ms" in text


def test_a_vector_searchs_time_over_the_floor_is_told_part_by_part_with_a_hop_hot_and_idle() -> None:
    # Given a size where the floor took 8 ms, the search's own read 11, the vector search in the
    # bench's process 12 and through the queue 16
    search = {
        "floor_p50_ms": 8.0,
        "vector": {"p50_ms": 16.0},
        "parts": {
            "index_read": {"p50_ms": 11.0},
            "searched_here": {"p50_ms": 12.0},
            "wake_up": {
                "idle_ms": 5.0,
                "redis_hot_ms": 0.03,
                "redis_idle_ms": 0.3,
                "neo4j_hot_ms": 0.4,
                "neo4j_idle_ms": 1.8,
            },
        },
    }

    line = report.parts_line(100_000, search)

    # Then each part is its difference to the one before, summing to the search's p50
    assert "client vector 16.0 = floor 8.0 +3.0 the index at the search's k and tenant" in line
    assert "+1.0 the searcher around it +4.0 the queue" in line
    assert "a hop after 5 ms idle (hot): Redis 0.30 (0.03), Neo4j 1.80 (0.40) ms" in line


def test_the_ingestion_ratio_the_stacks_cpu_allows_is_the_models_share_of_it() -> None:
    # Given the model at 4 CPU-ms a chunk alone and the stack at 4 more outside it
    ingest = {"raw_cpu_ms_per_chunk": 4.0, "stack_cpu_ms_per_chunk": 4.0}

    # Then with every core busy the pipeline runs at most at half the raw embedder's rate
    assert report.ratio_ceiling(ingest) == 0.5
