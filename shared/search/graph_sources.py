"""Candidates from the graph (seed 003), behind one Protocol, chosen by settings (off by default):

- ``EntityExpansion`` (``ENGRAM_SEARCH_ENTITY_EXPANSION``): the entities the query names (its
  words and phrases of up to three words, and what the extractor finds in it, resolved to the
  tenant's entities) → the memories that mention them, those naming more of them first. An
  entity named by more than ``search_entity_max_memories`` memories (a speaker, say) tells
  nothing and is left out.
- ``SessionEvidence`` (``ENGRAM_SEARCH_SESSION_EVIDENCE``): the turns just before and after the
  first hits, along NEXT (a question's evidence often spans consecutive turns).

Each returns Memories as candidates with their true cosine; they are merged with the indexes'
candidates (one per Memory, so a memory found both ways is one candidate) and scored by the same
fusion, keyword statistics and ranking as every other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from shared.errors import ConfigurationError
from shared.graph.entities import EntityExtractor, normalise
from shared.search.records import Candidate, Fused, Hit
from shared.search.sources import Query
from shared.settings import Settings

Row = dict[str, Any]


class CandidateExpander(Protocol):
    """A source of more candidates, given the query and those the indexes found, and a re-scorer
    of the fused candidates (before ranking, so it can lift one the indexes ranked low)."""

    name: str

    def expand(self, query: Query, found: Sequence[Candidate]) -> list[Candidate]: ...

    def rescore(self, query: Query, fused: Sequence[Fused]) -> list[Fused]: ...


@runtime_checkable
class GraphSearchStore(Protocol):
    """What the graph's sources ask of the primary store (``Neo4jStore``)."""

    def entity_candidates(
        self, keys: Sequence[str], max_memories: int, vector: Sequence[float], k: int, filters: Row
    ) -> list[Row]: ...

    def beside_candidates(self, ids: Sequence[str], vector: Sequence[float], filters: Row) -> list[Row]: ...

    def mentions_among(
        self, user_id: str, keys: Sequence[str], max_memories: int, ids: Sequence[str]
    ) -> dict[str, tuple[int, list[str]]]: ...

    def next_among(self, user_id: str, ids: Sequence[str]) -> list[tuple[str, str]]: ...


def _candidate(row: Row) -> Candidate:
    return Candidate(Hit.from_row(row["memory"]), 2.0 * float(row["score"]) - 1.0)


def query_entity_keys(text: str, extractor: EntityExtractor, longest: int = 3) -> list[str]:
    """Keys the query may name an entity by: the extractor's, and every run of up to ``longest``
    of its words (so "when did caroline go" still names "caroline")."""
    keys = [m.key for m in extractor.extract(text)]
    words = [w for w in (normalise(word) for word in text.split()) if w]
    for size in range(1, longest + 1):
        keys.extend(" ".join(words[i : i + size]) for i in range(len(words) - size + 1))
    return list(dict.fromkeys(key for key in keys if len(key) >= 2))


class EntityExpansion:
    name = "entities"

    def __init__(
        self, store: GraphSearchStore, extractor: EntityExtractor, max_memories: int, weight: float = 0.0
    ) -> None:
        self._store = store
        self._extractor = extractor
        self._max_memories = max_memories
        self._weight = weight

    def expand(self, query: Query, found: Sequence[Candidate]) -> list[Candidate]:
        keys = query_entity_keys(query.text, self._extractor)
        if not keys:
            return []
        rows = self._store.entity_candidates(
            keys, self._max_memories, query.vector, query.pool, query.filter_params()
        )
        return [_candidate(row) for row in rows]

    def rescore(self, query: Query, fused: Sequence[Fused]) -> list[Fused]:
        """Each memory gains ``weight`` x the best fused score x its share of the query's
        entities, each weighed by its rarity (1 / (1 + ln n) for an entity n memories name)."""
        keys = query_entity_keys(query.text, self._extractor)
        if self._weight <= 0 or not keys or not fused:
            return list(fused)
        ids = [f.candidate.hit.id for f in fused]
        found = self._store.mentions_among(query.user_id, keys, self._max_memories, ids)
        weights = {key: 1.0 / (1.0 + math.log(max(n, 1))) for key, (n, _) in found.items()}
        total = sum(weights.values())
        if total <= 0:
            return list(fused)
        share: dict[str, float] = {}
        for key, (_, named) in found.items():
            for memory_id in named:
                share[memory_id] = share.get(memory_id, 0.0) + weights[key] / total
        lift = self._weight * max(f.fused for f in fused)
        return [replace(f, fused=f.fused + lift * share.get(f.candidate.hit.id, 0.0)) for f in fused]


class SessionEvidence:
    name = "session"

    def __init__(self, store: GraphSearchStore, hits: int, weight: float = 0.0) -> None:
        self._store = store
        self._hits = hits
        self._weight = weight

    def expand(self, query: Query, found: Sequence[Candidate]) -> list[Candidate]:
        best = sorted(found, key=lambda c: (-c.similarity, c.hit.id))[: self._hits]
        if not best:
            return []
        rows = self._store.beside_candidates([c.hit.id for c in best], query.vector, query.filter_params())
        return [_candidate(row) for row in rows]

    def rescore(self, query: Query, fused: Sequence[Fused]) -> list[Fused]:
        """Each memory gains ``weight`` x the best fused score of the turns just before and after
        it (along NEXT) among the candidates: evidence spread over consecutive turns."""
        if self._weight <= 0 or not fused:
            return list(fused)
        score = {f.candidate.hit.id: f.fused for f in fused}
        best: dict[str, float] = {}
        for a, b in self._store.next_among(query.user_id, list(score)):
            best[a] = max(best.get(a, 0.0), score[b])
            best[b] = max(best.get(b, 0.0), score[a])
        return [replace(f, fused=f.fused + self._weight * best.get(f.candidate.hit.id, 0.0)) for f in fused]


def graph_expanders(store: object, settings: Settings) -> list[CandidateExpander]:
    """The graph's sources the settings switch on, over ``store``."""
    s = settings
    if not (s.search_entity_expansion or s.search_session_evidence):
        return []
    if not isinstance(store, GraphSearchStore):
        raise ConfigurationError("the graph's search sources need Neo4j as the search store")
    expanders: list[CandidateExpander] = []
    if s.search_entity_expansion:
        from shared.graph.entities import BuiltinExtractor

        # The query is read by the built-in rules whatever extracts at write time: a search
        # never waits for a model (the n-grams match what a stronger extractor named).
        expanders.append(
            EntityExpansion(store, BuiltinExtractor(), s.search_entity_max_memories, s.search_entity_weight)
        )
    if s.search_session_evidence:
        expanders.append(SessionEvidence(store, s.search_session_hits, s.search_session_weight))
    return expanders
