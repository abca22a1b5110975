"""engram bench's pure parts: Debian's stanzas, the corpus texts, percentiles, tenants, the
estimate, the targets' verdicts."""

from __future__ import annotations

from collections import Counter
from typing import Any

from producers.bench import corpus, estimate, report, run
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


def test_the_fallback_is_skipped_when_asked_and_always_on_a_running_stack() -> None:
    assert skipped({"fallback", "rss"}, own=True) == {"fallback", "rss"}
    assert skipped({"rss"}, own=True) == {"rss"}
    assert skipped({"rss"}, own=False) == {"fallback", "rss"}
