"""The graph's search sources over fakes of their Protocol: what they ask the store, that the
searcher merges them into the engram method only (one candidate per memory), and the settings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from shared.errors import ConfigurationError
from shared.graph.entities import BuiltinExtractor
from shared.models import SearchFilters
from shared.search import Query, Searcher
from shared.search.graph_sources import EntityExpansion, SessionEvidence, graph_expanders, query_entity_keys
from shared.search.records import Candidate, Fused, Hit
from shared.settings import Settings
from tests.unit.fakes import FakeEmbedder
from tests.unit.search_fakes import FakeSearchStore, Stored


class GraphStore(FakeSearchStore):
    """The fake search store with the graph's two reads: entities by key, memories beside."""

    def __init__(self, memories: Sequence[Stored], mentions: dict[str, list[str]], chain: list[str]) -> None:
        super().__init__(memories)
        self.mentions = mentions
        self.chain = chain
        self.graph_asked: list[tuple[str, Any]] = []

    def entity_candidates(
        self, keys: Sequence[str], max_memories: int, vector: Sequence[float], k: int, filters: dict[str, Any]
    ) -> list[dict[str, Any]]:
        self.graph_asked.append(("entities", list(keys)))
        named: dict[str, int] = {}
        for key in keys:
            ids = self.mentions.get(key, [])
            if len(ids) <= max_memories:
                for memory_id in ids:
                    named[memory_id] = named.get(memory_id, 0) + 1
        rows = [self._row(m, vector) for m in self.memories if m.id in named and self._passes(m, filters)]
        return sorted(rows, key=lambda r: -named[r["memory"]["id"]])[:k]

    def beside_candidates(
        self, ids: Sequence[str], vector: Sequence[float], filters: dict[str, Any]
    ) -> list[dict[str, Any]]:
        self.graph_asked.append(("beside", list(ids)))
        places = [self.chain.index(i) for i in ids if i in self.chain]
        near = {self.chain[p + d] for p in places for d in (-1, 1) if 0 <= p + d < len(self.chain)}
        return [self._row(m, vector) for m in self.memories if m.id in near and self._passes(m, filters)]

    def mentions_among(
        self, user_id: str, keys: Sequence[str], max_memories: int, ids: Sequence[str]
    ) -> dict[str, tuple[int, list[str]]]:
        return {
            key: (len(named), [i for i in named if i in ids])
            for key, named in self.mentions.items()
            if key in keys and len(named) <= max_memories
        }

    def next_among(self, user_id: str, ids: Sequence[str]) -> list[tuple[str, str]]:
        pairs = zip(self.chain, self.chain[1:], strict=False)
        return [(a, b) for a, b in pairs if a in ids and b in ids]


RNG = np.random.default_rng(3)
TEXTS = [
    "Caroline: I went to the support group.",
    "Melanie: How was it?",
    "Caroline: Great. I want to study at Stanford.",
    "Melanie: Lake Tahoe was lovely.",
]


def store() -> GraphStore:
    memories = [Stored(f"t{i}", "alice", text, RNG.normal(size=3)) for i, text in enumerate(TEXTS)]
    mentions = {
        "caroline": ["t0", "t2"],
        "melanie": ["t1", "t3"],
        "stanford": ["t2"],
        "lake tahoe": ["t3"],
    }
    return GraphStore(memories, mentions, ["t0", "t1", "t2", "t3"])


def query(text: str, pool: int = 2) -> Query:
    return Query(
        text=text,
        vector=list(RNG.normal(size=3)),
        user_id="alice",
        filters=SearchFilters(),
        top_k=1,
        pool=pool,
        terms=text.lower().split(),
    )


def test_query_keys_are_the_extractors_and_every_run_of_up_to_three_words() -> None:
    keys = query_entity_keys("when did Caroline visit lake tahoe?", BuiltinExtractor())
    assert keys[0] == "caroline"
    assert {"lake tahoe", "visit lake tahoe", "tahoe"} <= set(keys)
    assert query_entity_keys("?! a", BuiltinExtractor()) == []


def test_entity_expansion_asks_for_the_querys_entities_and_leaves_out_common_ones() -> None:
    graph = store()
    found = EntityExpansion(graph, BuiltinExtractor(), max_memories=1).expand(
        query("Where will Caroline study, Stanford?"), []
    )
    assert [c.hit.id for c in found] == ["t2"]  # caroline is named by two memories: too common at 1
    assert -1.0 <= found[0].similarity <= 1.0


def test_session_evidence_asks_for_what_is_beside_the_best_hits() -> None:
    graph = store()
    similarities = [0.1, 0.2, 0.9, 0.3]
    hits = [Candidate(Hit.from_row(m.fields()), x) for m, x in zip(graph.memories, similarities, strict=True)]
    found = SessionEvidence(graph, hits=1).expand(query("x"), hits)
    assert graph.graph_asked[-1] == ("beside", ["t2"])
    assert sorted(c.hit.id for c in found) == ["t1", "t3"]
    assert SessionEvidence(graph, hits=1).expand(query("x"), []) == []


def test_the_searcher_merges_the_sources_into_engram_only_one_candidate_per_memory() -> None:
    graph = store()
    s = Settings(_env_file=None, search_entity_expansion=True, search_session_evidence=True)
    searcher = Searcher(graph, FakeEmbedder(), s)

    engram = [c.hit.id for c in searcher.candidates(query("study at Stanford", pool=1), "engram")]
    rrf = [c.hit.id for c in searcher.candidates(query("study at Stanford", pool=1), "rrf")]

    assert len(engram) == len(set(engram))
    assert "t2" in engram and {"t1", "t3"} & set(engram)
    assert len(rrf) < len(engram)


def test_settings_switch_the_sources_on_and_a_store_without_a_graph_is_refused() -> None:
    assert graph_expanders(store(), Settings(_env_file=None)) == []
    both = Settings(_env_file=None, search_entity_expansion=True, search_session_evidence=True)
    assert [e.name for e in graph_expanders(store(), both)] == ["entities", "session"]
    with pytest.raises(ConfigurationError):
        graph_expanders(FakeSearchStore(), both)


def fused_of(graph: GraphStore, scores: list[float]) -> list[Fused]:
    return [
        Fused(Candidate(Hit.from_row(m.fields()), 0.5), x)
        for m, x in zip(graph.memories, scores, strict=True)
    ]


def test_the_entity_lift_raises_memories_naming_the_querys_rarer_entities() -> None:
    graph = store()
    fused = fused_of(graph, [0.5, 0.4, 0.3, 0.2])

    lifted = EntityExpansion(graph, BuiltinExtractor(), max_memories=9, weight=0.5).rescore(
        query("did caroline go to stanford"), fused
    )

    # stanford (one memory) weighs more than caroline (two); t2 names both: 0.5 x 0.5 lift in all
    scores = {f.candidate.hit.id: round(f.fused, 6) for f in lifted}
    caroline, stanford = 1 / (1 + math.log(2)), 1.0
    assert scores["t2"] == round(0.3 + 0.25, 6)
    assert scores["t0"] == round(0.5 + 0.25 * caroline / (caroline + stanford), 6)
    assert scores["t1"] == 0.4 and scores["t3"] == 0.2
    assert (
        EntityExpansion(graph, BuiltinExtractor(), 9, weight=0.0).rescore(query("stanford"), fused) == fused
    )


def test_the_session_lift_raises_a_turn_by_its_best_neighbour() -> None:
    graph = store()
    fused = fused_of(graph, [0.1, 0.2, 0.9, 0.3])

    lifted = SessionEvidence(graph, hits=5, weight=0.5).rescore(query("x"), fused)

    scores = {f.candidate.hit.id: round(f.fused, 6) for f in lifted}
    assert scores == {"t0": 0.2, "t1": 0.65, "t2": 1.05, "t3": 0.75}
