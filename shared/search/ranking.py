"""Ranking: threshold, nudges, dedup by content hash, one result per document (MaxSim), top_k.
Pure functions over fused candidates.

The threshold is on the cosine similarity, never on a fused score, so it means the same for every
method and source; a memory type may have a threshold of its own (seed 004). Nudges come in two
presets:

- ``additive`` (the default): the fused score plus importance, memory-type and recency nudges,
  each off (0) unless configured.
- ``seed004``: 50% fused score (as a share of the best), 30% importance, 15% memory type (its
  weight as a share of the largest), 5% recency — seed 004's weights, to compare.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from shared.search.records import Fused, Ranked
from shared.search.timeframe import Timeframe
from shared.settings import Settings

Preset = Literal["additive", "seed004"]


@dataclass(frozen=True, slots=True)
class RankingPolicy:
    threshold: float | None = None
    type_thresholds: Mapping[str, float] = field(default_factory=dict)
    preset: Preset = "additive"
    importance_weight: float = 0.0
    recency_weight: float = 0.0
    recency_half_life_days: float = 30.0
    type_weights: Mapping[str, float] = field(default_factory=dict)
    one_per_document: bool = False
    window: Timeframe | None = None
    """The time the query names: memories made within it get ``time_weight``."""
    time_weight: float = 0.0
    time_slack: timedelta = timedelta(0)

    @classmethod
    def from_settings(
        cls, s: Settings, threshold: float | None, window: Timeframe | None = None
    ) -> RankingPolicy:
        return cls(
            threshold=threshold,
            type_thresholds=s.search_type_thresholds,
            preset=s.search_ranking_preset,
            importance_weight=s.search_importance_weight,
            recency_weight=s.search_recency_weight,
            recency_half_life_days=s.search_recency_half_life_days,
            type_weights=s.search_memory_type_weights,
            one_per_document=s.search_one_per_document,
            window=window,
            time_weight=s.search_time_weight,
            time_slack=timedelta(days=s.search_time_slack_days),
        )

    def passes(self, similarity: float, memory_type: str) -> bool:
        floor = self.type_thresholds.get(memory_type, self.threshold)
        return floor is None or similarity >= floor


def recency(created_at: datetime | None, now: datetime, half_life_days: float) -> float:
    """1 for a memory made now, halving every half-life; 0 when undated."""
    if created_at is None:
        return 0.0
    age_days = max((now - created_at).total_seconds(), 0.0) / 86400
    return math.pow(0.5, age_days / half_life_days)


def _additive(item: Fused, policy: RankingPolicy, now: datetime) -> tuple[float, dict[str, float]]:
    hit = item.candidate.hit
    nudges: dict[str, float] = {}
    if policy.importance_weight:
        nudges["importance"] = policy.importance_weight * (hit.importance - 0.5)
    if policy.recency_weight:
        nudges["recency"] = policy.recency_weight * recency(
            hit.created_at, now, policy.recency_half_life_days
        )
    if hit.memory_type in policy.type_weights:
        nudges["memory_type"] = policy.type_weights[hit.memory_type]
    if (
        policy.window is not None
        and policy.time_weight
        and policy.window.holds(hit.created_at, policy.time_slack)
    ):
        nudges["time"] = policy.time_weight
    return item.fused + sum(nudges.values()), nudges


def _seed004(
    item: Fused, policy: RankingPolicy, now: datetime, best: float, heaviest: float
) -> tuple[float, dict[str, float]]:
    hit = item.candidate.hit
    share = item.fused / best if best > 0 else 0.0
    nudges = {
        "importance": 0.30 * hit.importance,
        "memory_type": 0.15 * policy.type_weights.get(hit.memory_type, 1.0) / heaviest,
        "recency": 0.05 * recency(hit.created_at, now, policy.recency_half_life_days),
    }
    return 0.50 * share + sum(nudges.values()), nudges


def rank(fused: Sequence[Fused], policy: RankingPolicy, top_k: int, now: datetime) -> list[Ranked]:
    """Threshold, nudges, order (score, then similarity, then id), dedup by content hash, one
    result per document if asked (its best chunk: MaxSim), top_k."""
    kept = [f for f in fused if policy.passes(f.candidate.similarity, f.candidate.hit.memory_type)]
    best = max((f.fused for f in kept), default=0.0)
    heaviest = max([1.0, *policy.type_weights.values()])
    ranked: list[Ranked] = []
    for item in kept:
        if policy.preset == "seed004":
            score, nudges = _seed004(item, policy, now, best, heaviest)
        else:
            score, nudges = _additive(item, policy, now)
        ranked.append(Ranked(item.candidate, item.fused, score, nudges))
    ranked.sort(key=lambda r: (-r.score, -r.candidate.similarity, r.hit.id))
    return top(dedup(ranked, policy.one_per_document), top_k)


def dedup(ranked: Sequence[Ranked], one_per_document: bool = False) -> list[Ranked]:
    """The first (best) of each content hash; with ``one_per_document`` also of each document."""
    seen_content: set[str] = set()
    seen_documents: set[str] = set()
    kept: list[Ranked] = []
    for item in ranked:
        content_key = item.hit.content_hash or item.hit.id
        if content_key in seen_content:
            continue
        if one_per_document and item.hit.document_id in seen_documents:
            continue
        seen_content.add(content_key)
        seen_documents.add(item.hit.document_id)
        kept.append(item)
    return kept


def best_per_document(ranked: Sequence[Ranked]) -> list[Ranked]:
    """MaxSim (seed 002): a document scored by its best chunk — the first of each document."""
    return dedup(ranked, one_per_document=True)


def top(ranked: Sequence[Ranked], top_k: int) -> list[Ranked]:
    return list(ranked[:top_k])
