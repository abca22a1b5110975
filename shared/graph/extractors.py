"""Stronger entity extractors behind ``EntityExtractor``, and the choice by settings.

- ``builtin`` (default): ``BuiltinExtractor``, regular expressions, offline and fast.
- ``spacy``: a spaCy pipeline from an installed model package (``pip install spacy`` and a model
  package such as ``en_core_web_sm``); loaded from the package only, never downloaded.
- ``llm``: a chat model through an OpenAI-compatible ``/v1/chat/completions`` or Ollama
  ``/api/chat`` endpoint (shared/llm/), asked for JSON.
- ``off``: no entities.

An extractor that fails on one memory (the LLM is down) falls back to the built-in one for it, so
a write never fails for its entities.
"""

from __future__ import annotations

import importlib
import json
import logging
from typing import Any

import httpx

from shared.errors import ConfigurationError
from shared.graph.entities import (
    KINDS,
    BuiltinExtractor,
    EntityExtractor,
    EntityKind,
    Mention,
    NoExtractor,
    mention,
    unique,
)
from shared.llm import CHAT_ERRORS, ChatApi, Message, make_chat
from shared.settings import Settings

log = logging.getLogger(__name__)

# spaCy's labels as Engram's kinds; the others (numbers, money, ...) are left out.
SPACY_KINDS: dict[str, EntityKind] = {
    "PERSON": "person",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "ORG": "organisation",
    "NORP": "organisation",
    "PRODUCT": "thing",
    "EVENT": "thing",
    "WORK_OF_ART": "thing",
    "LAW": "thing",
    "LANGUAGE": "thing",
    "DATE": "date",
}

PROMPT = (
    "List the named entities of the text: people, places, organisations, things (products, "
    "events, works, pets) and dates. Reply with JSON only: "
    '{"entities": [{"name": "...", "kind": "person|place|organisation|thing|date"}]}.'
)


class SpacyExtractor:
    """Named entities of a spaCy pipeline loaded from an installed package."""

    name = "spacy"

    def __init__(self, model: str, limit: int = 16, nlp: Any = None) -> None:
        if nlp is None:
            try:
                package = importlib.import_module(model)
            except ImportError as exc:
                raise ConfigurationError(
                    f"ENGRAM_GRAPH_ENTITIES=spacy needs spaCy and the model package {model!r} installed "
                    f"(pip install spacy and the model's wheel); nothing is downloaded at run time: {exc}"
                ) from exc
            nlp = package.load(disable=["lemmatizer", "textcat"])
        self._nlp = nlp
        self._limit = limit
        self._fallback = BuiltinExtractor(limit)

    def extract(self, text: str) -> list[Mention]:
        speaker = self._fallback.extract(text)[:1] if ":" in text[:40] else []
        found = [m for m in speaker if m.kind == "person"]
        for entity in self._nlp(text).ents:
            kind = SPACY_KINDS.get(entity.label_)
            named = mention(entity.text, kind) if kind is not None else None
            if named is not None:
                found.append(named)
        return unique(found, self._limit)


class LlmExtractor:
    """Entities named by a chat model; a memory the model cannot answer for gets the built-in
    extractor's entities (logged), so a write never fails for its entities."""

    name = "llm"

    def __init__(
        self,
        url: str,
        model: str,
        api: ChatApi = "openai",
        api_key: str | None = None,
        limit: int = 16,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._chat = make_chat(url, model, api, api_key, timeout_s, transport)
        self._limit = limit
        self._fallback = BuiltinExtractor(limit)

    def extract(self, text: str) -> list[Mention]:
        try:
            content = self._ask(text)
        except CHAT_ERRORS as exc:
            log.warning("entity model unavailable, built-in extractor used: %s: %s", type(exc).__name__, exc)
            return self._fallback.extract(text)
        return unique(_mentions(content), self._limit)

    def _ask(self, text: str) -> str:
        messages: list[Message] = [{"role": "system", "content": PROMPT}, {"role": "user", "content": text}]
        return self._chat.complete(messages)

    def close(self) -> None:
        self._chat.close()


def _mentions(content: str) -> list[Mention]:
    """The model's JSON as mentions: anything not a {name, kind} with a known kind is left out."""
    start, end = content.find("{"), content.rfind("}")
    answer = json.loads(content[start : end + 1]) if start >= 0 else {}
    items = answer.get("entities") if isinstance(answer, dict) else None
    found: list[Mention] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        kind = item.get("kind")
        named = mention(item["name"], kind if kind in KINDS else "thing")
        if named is not None:
            found.append(named)
    return found


def make_extractor(settings: Settings) -> EntityExtractor:
    s = settings
    limit = s.graph_max_entities
    if s.graph_entities == "off":
        return NoExtractor()
    if s.graph_entities == "spacy":
        return SpacyExtractor(s.graph_spacy_model, limit)
    if s.graph_entities == "llm":
        if s.graph_llm_url is None:
            raise ConfigurationError("ENGRAM_GRAPH_ENTITIES=llm needs ENGRAM_GRAPH_LLM_URL")
        # An empty variable (ENGRAM_GRAPH_LLM_API_KEY=) is no key, not an empty one.
        key = s.graph_llm_api_key.get_secret_value() or None if s.graph_llm_api_key is not None else None
        return LlmExtractor(s.graph_llm_url, s.graph_llm_model, s.graph_llm_api, key, limit)
    return BuiltinExtractor(limit)
