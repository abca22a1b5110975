"""Shaping: ranked candidates into results with their explanations, neighbours and a token
budget for context injection (seed 004: stop when the budget is spent). Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC

from shared.models import ScoreExplanation, SearchMethod, SearchResult
from shared.search.records import Ranked


@dataclass(frozen=True, slots=True)
class Neighbours:
    """Chunks around a memory in its document: before (nearest last) and after (nearest first)."""

    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


def explain(item: Ranked, method: SearchMethod) -> ScoreExplanation:
    c = item.candidate
    return ScoreExplanation(
        method=method,
        similarity=round(c.similarity, 6),
        keyword=None if c.keyword is None else round(c.keyword, 6),
        keyword_share=None if c.keyword_share is None else round(c.keyword_share, 6),
        feedback_similarity=None if c.feedback is None else round(c.feedback, 6),
        vector_rank=c.vector_rank,
        keyword_rank=c.keyword_rank,
        fused=round(item.fused, 6),
        nudges={name: round(value, 6) for name, value in item.nudges.items()},
        rerank=None if item.rerank is None else round(item.rerank, 6),
        score=round(item.score, 6),
    )


def result(item: Ranked, method: SearchMethod, neighbours: Neighbours | None = None) -> SearchResult:
    hit = item.hit
    around = neighbours or Neighbours()
    return SearchResult(
        id=hit.id,
        content=hit.content,
        similarity_score=round(item.candidate.similarity, 6),
        score=round(item.score, 6),
        memory_type=hit.memory_type,
        importance=hit.importance,
        document_id=hit.document_id,
        chunk_index=hit.chunk_index,
        title=hit.title,
        session_id=hit.session_id,
        project_id=hit.project_id,
        tags=list(hit.tags),
        created_at=hit.created_at,
        token_count=hit.token_count,
        explanation=explain(item, method),
        before=list(around.before),
        after=list(around.after),
    )


def results(
    ranked: Sequence[Ranked], method: SearchMethod, neighbours: Mapping[str, Neighbours] | None = None
) -> list[SearchResult]:
    found = neighbours or {}
    return [result(item, method, found.get(item.hit.id)) for item in ranked]


def estimate_tokens(text: str) -> int:
    """About four characters a token, when a memory does not say its own count."""
    return max(1, (len(text) + 3) // 4)


def _tokens(r: SearchResult) -> int:
    texts = [*r.before, r.content, *r.after]
    own = r.token_count if r.token_count is not None and not r.before and not r.after else None
    return own if own is not None else sum(estimate_tokens(t) for t in texts)


def within_budget(found: Sequence[SearchResult], budget: int) -> list[SearchResult]:
    """The results, best first, up to the first that would overrun the budget (seed 004)."""
    kept: list[SearchResult] = []
    spent = 0
    for r in found:
        cost = _tokens(r)
        if spent + cost > budget:
            break
        kept.append(r)
        spent += cost
    return kept


def context(found: Sequence[SearchResult]) -> tuple[str, int]:
    """The results as one text for an agent's prompt, and its tokens (as ``within_budget`` counts).
    Each memory is headed by where and when it was said (its title or document, its session, its
    moment in UTC): a question about when something happened is answered by the header."""
    blocks = []
    for place, r in enumerate(found, start=1):
        said = [r.title or r.document_id]
        if r.session_id:
            said.append(f"session {r.session_id}")
        if r.created_at:
            said.append(f"{r.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC")
        text = "\n".join([*r.before, r.content, *r.after])
        blocks.append(f"[{place}] {' · '.join(said)} (score {r.score:.3f})\n{text}")
    return "\n\n".join(blocks), sum(_tokens(r) for r in found)
