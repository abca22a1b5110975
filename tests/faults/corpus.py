"""Documents a scenario sends, and the Memories the stores must then hold.

The texts are made up from word lists, so they are the same on every run and need no data set;
their lengths vary so a document makes one to three chunks. What the stores must hold is worked out
with the workers' own chunker and ids, so a scenario's expectation is the pipeline's contract, not
a copy of its output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shared.chunking import Chunker
from shared.ids import content_hash, memory_id
from shared.models import DocumentIn
from shared.settings import Settings
from shared.tokenizer import load_tokenizer

_ANIMALS = ("otter", "heron", "lynx", "badger", "marten", "ibis", "stoat", "crane", "vole", "kestrel")
_PLACES = (
    "the river delta",
    "a pine forest",
    "the salt marsh",
    "an alpine meadow",
    "the old quarry",
    "a beech wood",
)
_ACTS = ("feeding", "resting", "calling", "hunting", "preening", "nesting", "drinking")


def text_of(document: int, revision: int = 0) -> str:
    """Document ``document``'s text in its ``revision``. Most are one short chunk, which keeps the
    embedding cheap; every tenth is 12 to 26 sentences, two or three chunks."""
    long = document % 10 == 0
    sentences = 12 + (document + revision * 5) % 15 if long else 1 + (document + revision) % 3
    return " ".join(
        f"Note {document}.{revision}.{i}: a {_ANIMALS[(document + i) % len(_ANIMALS)]} was "
        f"{_ACTS[(i + revision) % len(_ACTS)]} near {_PLACES[(document * 3 + i) % len(_PLACES)]} "
        f"for about {(i * 7 + document) % 50 + 2} minutes on day {revision * 100 + i}."
        for i in range(sentences)
    )


def documents(user_id: str, count: int, revision: int = 0, start: int = 0) -> list[DocumentIn]:
    return [
        DocumentIn(user_id=user_id, id=f"doc-{n:05d}", text=text_of(n, revision), title=f"Notes {n}")
        for n in range(start, start + count)
    ]


@dataclass(frozen=True, slots=True)
class ExpectedMemory:
    document_id: str
    chunk_index: int
    content_hash: str
    version: int | None


def make_chunker(settings: Settings) -> Chunker:
    """The chunker the ingest workers use, with the same settings."""
    s = settings
    return Chunker(load_tokenizer(s), s.chunk_size_tokens, s.chunk_overlap_tokens, s.chunk_sections)


class Expectation:
    """The documents a tenant must end with: the last accepted text of each, or none if deleted."""

    def __init__(self, user_id: str, chunker: Chunker) -> None:
        self.user_id = user_id
        self._chunker = chunker
        self._documents: dict[str, tuple[str, int | None]] = {}
        self._dropped: set[str] = set()

    def accepted(self, docs: Iterable[DocumentIn], version: int | None) -> None:
        for doc in docs:
            self._documents[doc.document_id] = (doc.text, version)

    def deleted(self, document_ids: Iterable[str]) -> None:
        for document_id in document_ids:
            self._documents.pop(document_id, None)

    def dropped(self, memory_ids: Iterable[str]) -> None:
        """Memories deleted from Neo4j by hand: the source of truth no longer has them."""
        self._dropped.update(memory_ids)

    @property
    def document_ids(self) -> list[str]:
        return list(self._documents)

    def memories(self) -> Mapping[str, ExpectedMemory]:
        chunker = self._chunker
        expected: dict[str, ExpectedMemory] = {}
        for document_id, (text, version) in self._documents.items():
            for index, chunk in enumerate(chunker.chunk(text)):
                mid = memory_id(self.user_id, document_id, index)
                if mid not in self._dropped:
                    expected[mid] = ExpectedMemory(document_id, index, content_hash(chunk.text), version)
        return expected
