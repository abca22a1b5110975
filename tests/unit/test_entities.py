"""Entity extraction: the built-in rules, the spaCy adapter (over a pipeline stand-in), the LLM
adapter over httpx's MockTransport (both chat APIs, and a model that is down), the choice by
settings, and the rows the graph writer makes of them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from shared.errors import ConfigurationError
from shared.graph.entities import BuiltinExtractor, Mention, NoExtractor, entity_key, normalise
from shared.graph.extractors import LlmExtractor, SpacyExtractor, make_extractor
from shared.settings import Settings
from shared.stores.neo4j.graph import GraphSource, GraphWriter, entity_id


def keys(text: str) -> list[tuple[str, str]]:
    return [(m.key, m.kind) for m in BuiltinExtractor().extract(text)]


def test_a_speaker_prefix_is_a_person_and_names_in_the_text_are_entities() -> None:
    assert keys("Caroline: I went to the LGBTQ support group in Boston yesterday.") == [
        ("caroline", "person"),
        ("lgbtq", "organisation"),
        ("boston", "place"),
    ]


def test_dates_are_resolved_to_their_iso_day_or_month() -> None:
    text = "We met on 8 May, 2023, then May 20, 2023, again in June 2023 and on 2023-07-01."
    assert [k for k, kind in keys(text) if kind == "date"] == [
        "2023-05-08",
        "2023-05-20",
        "2023-06",
        "2023-07-01",
    ]


def test_common_words_opening_a_sentence_are_not_names_but_names_inside_are() -> None:
    found = keys("Thanks Melanie! Yesterday I met John Smith at Google Inc. in New York. Sounds fun.")
    assert found == [
        ("melanie", "person"),
        ("john smith", "person"),
        ("google inc", "organisation"),
        ("new york", "place"),
    ]


def test_multi_word_names_keep_their_connectors_and_drop_a_possessive() -> None:
    found = keys("I saw the Museum of Modern Art and Caroline's painting at The Louvre.")
    assert ("museum of modern art", "thing") in found
    assert ("caroline", "person") in found
    assert ("louvre", "place") in found


def test_normalise_folds_case_width_articles_and_possessives() -> None:
    assert normalise("  The  Louvre's ") == "louvre"
    assert normalise("\uff23\uff21\uff32\uff2f\uff2c\uff29\uff2e\uff25")  # full-width CAROLINE == "caroline"
    assert normalise("!!!") == ""


def test_each_name_once_and_at_most_the_limit() -> None:
    text = "Anna met Bob. Anna met Carl. Dora, Emil, Fritz and Gert came."
    found = BuiltinExtractor(limit=4).extract(text)
    assert [m.key for m in found] == ["anna", "bob", "carl", "dora"]


def test_text_without_names_has_no_entities() -> None:
    assert BuiltinExtractor().extract("i think so too. sounds good!") == []
    assert NoExtractor().extract("Caroline: hello Boston") == []


@dataclass
class FakeSpan:
    text: str
    label_: str


@dataclass
class FakeDoc:
    ents: list[FakeSpan]


def test_spacy_labels_become_kinds_and_the_speaker_is_kept() -> None:
    def nlp(text: str) -> FakeDoc:
        return FakeDoc([FakeSpan("Boston", "GPE"), FakeSpan("42", "CARDINAL"), FakeSpan("Acme Corp", "ORG")])

    found = SpacyExtractor("unused", nlp=nlp).extract(
        "Caroline: I moved to Boston for Acme Corp, 42 days ago."
    )

    assert [(m.key, m.kind) for m in found] == [
        ("caroline", "person"),
        ("boston", "place"),
        ("acme corp", "organisation"),
    ]


def test_spacy_without_the_model_package_is_a_configuration_error_not_a_download() -> None:
    with pytest.raises(ConfigurationError, match="nothing is downloaded"):
        SpacyExtractor("engram_no_such_model_package")


def chat(api: str, answer: Any, seen: list[dict[str, Any]], status: int = 200) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append({"path": request.url.path, "body": json.loads(request.content), **dict(request.headers)})
        content = json.dumps(answer)
        if api == "ollama":
            return httpx.Response(status, json={"message": {"role": "assistant", "content": content}})
        return httpx.Response(status, json={"choices": [{"message": {"content": content}}]})

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(("api", "path"), [("openai", "/v1/chat/completions"), ("ollama", "/api/chat")])
def test_an_llm_names_entities_through_either_chat_api(api: str, path: str) -> None:
    seen: list[dict[str, Any]] = []
    answer = {
        "entities": [
            {"name": "Caroline", "kind": "person"},
            {"name": "the Louvre", "kind": "place"},
            {"name": "a thing", "kind": "unknown kind"},
            {"kind": "person"},
            "not an object",
        ]
    }
    extractor = LlmExtractor(
        "http://llm.test",
        "m1",
        api,
        api_key="k",
        transport=chat(api, answer, seen),  # type: ignore[arg-type]
    )

    found = extractor.extract("Caroline went to the Louvre.")

    assert [(m.key, m.kind) for m in found] == [
        ("caroline", "person"),
        ("louvre", "place"),
        ("a thing", "thing"),
    ]
    assert seen[0]["path"] == path
    assert seen[0]["authorization"] == "Bearer k"
    assert seen[0]["body"]["model"] == "m1"
    assert seen[0]["body"]["messages"][1]["content"] == "Caroline went to the Louvre."


def test_an_llm_that_is_down_leaves_the_builtin_entities_and_never_fails_the_write() -> None:
    seen: list[dict[str, Any]] = []
    extractor = LlmExtractor("http://llm.test", "m1", transport=chat("openai", {}, seen, status=503))

    found = extractor.extract("Caroline: hello from Boston")

    assert [m.key for m in found] == ["caroline", "boston"]
    assert len(seen) == 1


def test_settings_choose_the_extractor() -> None:
    assert make_extractor(Settings(graph_entities="builtin")).name == "builtin"
    assert make_extractor(Settings(graph_entities="off")).name == "off"
    assert make_extractor(Settings(graph_entities="llm", graph_llm_url="http://llm.test")).name == "llm"
    with pytest.raises(ConfigurationError, match="GRAPH_LLM_URL"):
        make_extractor(Settings(graph_entities="llm"))
    with pytest.raises(ConfigurationError):
        make_extractor(Settings(graph_entities="spacy", graph_spacy_model="engram_no_such_model_package"))


class Fixed:
    name = "fixed"

    def extract(self, text: str) -> list[Mention]:
        return [
            Mention("Zed", "zed", "person"),
            Mention("Amy", "amy", "person"),
            Mention("Bo", "bo", "place"),
        ]


def test_graph_rows_list_entities_in_id_order_and_pair_the_first_few() -> None:
    writer = GraphWriter(Fixed(), related_limit=2)

    (row,) = writer.entity_rows([GraphSource("m1", "alice", "text")])

    assert [e["key"] for e in row["entities"]] == ["amy", "bo", "zed"]
    assert row["entities"][0]["id"] == entity_id("alice", "amy")
    assert row["pairs"] == [[entity_id("alice", "amy"), entity_id("alice", "zed")]]


def test_a_turns_position_is_a_whole_number_that_reaches_the_memory_payload() -> None:
    from pydantic import ValidationError

    from shared.models import DocumentIn, Memory

    assert DocumentIn(user_id="u", text="hi", position=3).position == 3
    for bad in (-1, "3", True, 1.5):
        with pytest.raises(ValidationError):
            DocumentIn(user_id="u", text="hi", position=bad)
    memory = Memory(
        id="m", document_id="d", user_id="u", chunk_index=0, content="hi", key="hi", content_hash="h",
        token_count=1, session_id="s", position=3, created_at="2023-05-08T00:00:00Z", version=1,
        embedding_model="m", embedding_dim=3,
    )  # fmt: skip
    assert memory.payload()["position"] == 3


def test_a_date_asked_for_by_its_shown_name_resolves_to_the_key_it_was_stored_by() -> None:
    # Given the keys the extractor stored dates by
    stored = {
        m.name: m.key for m in BuiltinExtractor().extract("On 3 May 2024 and May 20, 2023 in June 2023.")
    }
    # Then each name shown resolves to its stored key, and other names are still normalised
    assert stored and all(entity_key(name) == key for name, key in stored.items())
    assert entity_key("3  may 2024") == "2024-05-03" and entity_key("2024-05-03") == "2024-05-03"
    assert entity_key("The Louvre's") == "louvre" and entity_key("May") == "may"


def test_what_precedes_a_name_is_read_across_any_whitespace_as_before() -> None:
    # Given names after long and mixed whitespace, a place word, "the" in capitals, a sentence's
    # end followed by blank lines, and "in" that is only part of a word before it ("bathe")
    text = "We flew   \n  from  THE\n\tLouvre to Paris.\n\n  Anything new? Then visiting\u00a0Berlin; Monday Mass in bathe Rome"
    # When extracted (what precedes each phrase is now read backwards from it)
    found = keys(text)
    # Then each is read as the forward patterns read it
    assert found == [
        ("louvre", "place"),
        ("paris", "place"),
        ("anything", "person"),
        ("berlin", "place"),
        ("mass", "person"),
        ("rome", "person"),
    ]
