"""An optional agentic second round (seed 002): a chat model reads the first results, says
whether they suffice to answer the query and, if not, writes up to three follow-up queries;
each is searched and the rounds are merged by reciprocal rank fusion. Off unless
``ENGRAM_SEARCH_AGENT_URL`` is set. Any OpenAI-compatible ``/v1/chat/completions`` or Ollama
``/api/chat`` endpoint (shared/llm/)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import httpx

from shared.errors import ServiceUnavailable
from shared.llm import CHAT_ERRORS, ChatApi, Message, make_chat
from shared.search.records import Ranked

PROMPT = (
    "You judge retrieved memories for a question. Reply with JSON only: "
    '{"sufficient": true|false, "queries": ["..."]}. "sufficient" is true when the memories '
    "contain what is needed to answer. If not, give up to {n} short search queries for what is "
    "missing (names, places, dates, other wording); else an empty list."
)


@dataclass(frozen=True, slots=True)
class Verdict:
    sufficient: bool
    queries: list[str] = field(default_factory=list)


class Judge(Protocol):
    def judge(self, query: str, passages: Sequence[str]) -> Verdict:
        """Raises ``ServiceUnavailable`` when the model cannot be asked."""
        ...


class ChatJudge:
    def __init__(
        self,
        url: str,
        model: str,
        api: ChatApi = "openai",
        api_key: str | None = None,
        max_queries: int = 3,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._chat = make_chat(url, model, api, api_key, timeout_s, transport)
        self._max = max_queries

    def judge(self, query: str, passages: Sequence[str]) -> Verdict:
        listed = "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))
        messages: list[Message] = [
            {"role": "system", "content": PROMPT.replace("{n}", str(self._max))},
            {"role": "user", "content": f"Question: {query}\n\nMemories:\n{listed}"},
        ]
        try:
            content = self._chat.complete(messages)
        except CHAT_ERRORS as exc:
            raise ServiceUnavailable("agent", f"{type(exc).__name__}: {exc}") from exc
        return self._verdict(content)

    def _verdict(self, content: str) -> Verdict:
        """The model's JSON; anything unreadable counts as sufficient (no second round)."""
        start, end = content.find("{"), content.rfind("}")
        try:
            answer = json.loads(content[start : end + 1])
        except ValueError:
            return Verdict(True)
        if not isinstance(answer, dict):
            return Verdict(True)
        queries = [q.strip() for q in answer.get("queries") or [] if isinstance(q, str) and q.strip()]
        return Verdict(bool(answer.get("sufficient", True)) or not queries, queries[: self._max])

    def close(self) -> None:
        self._chat.close()


def fuse_rounds(rounds: Sequence[Sequence[Ranked]], k: int = 60) -> list[Ranked]:
    """Multi-way reciprocal rank fusion of several rounds' ranked lists (a memory keeps what the
    first round that found it knew of it); the fused sum becomes its score."""
    totals: dict[str, float] = {}
    first: dict[str, Ranked] = {}
    for ranked in rounds:
        for place, item in enumerate(ranked, start=1):
            totals[item.hit.id] = totals.get(item.hit.id, 0.0) + 1.0 / (k + place)
            first.setdefault(item.hit.id, item)
    ordered = sorted(first, key=lambda memory_id: (-totals[memory_id], memory_id))
    return [replace(first[m], score=totals[m]) for m in ordered]
