"""The agentic second round's judge (design seed 002): a chat model reads the first results and
says whether they answer the query; if not, it writes a few follow-up queries for what is
missing. The search runs those and fuses every round's ranking (multi-way RRF).

The model's text is read leniently (the first JSON object in it), and anything unreadable counts as
"sufficient": a judge that cannot be understood never costs the caller more searches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from pydantic import BaseModel, Field

from shared.llm.base import ChatModel

SYSTEM = (
    "You judge whether retrieved memories answer a question. Reply with JSON only: "
    '{"sufficient": true} when they contain what is needed to answer it, else '
    '{"sufficient": false, "queries": ["...", ...]} with up to MAX short search queries, each '
    "asking for a piece of information that is missing (names, dates, places, events), not "
    "rephrasings of the question."
)
_CONTEXT_CHARS = 600
_QUERY_CHARS = 256


class Judgement(BaseModel):
    sufficient: bool
    queries: list[str] = Field(default_factory=list)
    reason: str | None = Field(None, description="Why the answer was taken as sufficient, if unread.")


def prompt(query: str, contexts: Sequence[str]) -> str:
    shown = "\n".join(
        f"[{i}] {' '.join(text.split())[:_CONTEXT_CHARS]}" for i, text in enumerate(contexts, start=1)
    )
    return f"Question: {query}\n\nRetrieved memories:\n{shown or '(none)'}\n\nJSON:"


def parse(text: str, query: str, max_queries: int) -> Judgement:
    """The judgement in the model's text; unreadable → sufficient, with the reason."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        found = json.loads(match.group(0)) if match else None
    except ValueError:
        found = None
    if not isinstance(found, dict) or not isinstance(found.get("sufficient"), bool):
        return Judgement(sufficient=True, reason="the judge's answer could not be read")
    if found["sufficient"]:
        return Judgement(sufficient=True)
    raw = found.get("queries")
    queries: list[str] = []
    seen = {query.strip().casefold()}
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, str):
            continue
        cleaned = " ".join(item.split())[:_QUERY_CHARS]
        if cleaned and cleaned.casefold() not in seen:
            seen.add(cleaned.casefold())
            queries.append(cleaned)
    if not queries:
        return Judgement(sufficient=True, reason="the judge found the results short but asked nothing")
    return Judgement(sufficient=False, queries=queries[:max_queries])


class Judge:
    def __init__(self, chat: ChatModel, max_queries: int) -> None:
        self._chat = chat
        self._max_queries = max_queries
        self._system = SYSTEM.replace("MAX", str(max_queries))

    def judge(self, query: str, contexts: Sequence[str]) -> Judgement:
        return parse(self._chat.complete(self._system, prompt(query, contexts)), query, self._max_queries)
