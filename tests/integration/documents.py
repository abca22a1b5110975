"""Texts, documents and counts the pipeline suites share: facts a paraphrase finds, a long text of
many chunks, notes of paragraphs, a batch posted, a tenant's graph counted. A helper module, so no
test module imports another."""

from __future__ import annotations

import sys
from pathlib import Path

import neo4j
from fastapi.testclient import TestClient

from tests.integration.support import cypher

# The engram command of the venv running the tests.
ENGRAM = str(Path(sys.executable).with_name("engram"))

FACTS = {
    "eiffel": "The Eiffel Tower was finished in 1889 for the World's Fair and stands on the Champ de Mars in Paris.",
    "photosynthesis": "Photosynthesis lets plants turn sunlight, water and carbon dioxide into sugar, releasing oxygen.",
    "sourdough": "A sourdough starter is a fermented mix of flour and water that keeps wild yeast and lactic bacteria alive.",
    "borrow": "The Rust borrow checker makes sure no reference outlives the data it points to, at compile time.",
    "tides": "Tides rise and fall twice a day because the Moon's gravity pulls the oceans toward it.",
}


def long_text(sentences: int = 60) -> str:
    animals = ["otter", "heron", "lynx", "badger", "marten", "ibis"]
    places = ["the river delta", "a pine forest", "the salt marsh", "an alpine meadow", "the old quarry"]
    return " ".join(
        f"Observation {i}: a {animals[i % len(animals)]} was seen near {places[i % len(places)]} "
        f"at dawn, feeding for about {i + 3} minutes before it moved on."
        for i in range(sentences)
    )


def post_documents(api: TestClient, documents: list[dict[str, object]]) -> list[str]:
    response = api.post("/api/documents", json={"documents": documents})
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["accepted"] == len(documents)
    return list(body["document_ids"])


def tenant_counts(driver: neo4j.Driver, user_id: str) -> dict[str, int]:
    return cypher(
        driver,
        """
        MATCH (d:Document {user_id: $u})
        OPTIONAL MATCH (d)-[h:HAS_CHUNK]->(m:Memory)
        OPTIONAL MATCH (m)-[n:NEXT]->()
        RETURN count(DISTINCT d) AS documents, count(DISTINCT m) AS memories,
               count(DISTINCT h) AS has_chunk, count(DISTINCT n) AS next
        """,
        u=user_id,
    )[0]


WORDS = [
    "garden",
    "river",
    "stone",
    "quiet",
    "market",
    "winter",
    "letter",
    "morning",
    "bridge",
    "window",
    "paper",
    "lantern",
    "harbor",
    "meadow",
    "silver",
    "forest",
    "kettle",
    "candle",
    "ladder",
    "pocket",
    "orchard",
    "valley",
    "thunder",
    "velvet",
]


def paragraph(seed: int) -> str:
    """A paragraph of a few sentences, its words chosen by ``seed`` (two seeds, two paragraphs)."""
    sentences = []
    for s in range(4 + seed % 4):
        words = [WORDS[(seed * 7 + s * 5 + w * 3) % len(WORDS)] for w in range(9 + (seed + s) % 7)]
        sentences.append(" ".join(words).capitalize() + ".")
    return f"Note {seed}: " + " ".join(sentences)


def notes(paragraphs: int, first: int = 0) -> str:
    return "\n\n".join(paragraph(first + i) for i in range(paragraphs))
