"""A BEIR-layout folder: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv``."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from shared.errors import InvalidInput
from shared.models import DocumentIn


@dataclass(frozen=True, slots=True)
class CorpusDocument:
    id: str
    title: str
    text: str

    @property
    def body(self) -> str:
        """Title and text as BEIR hands them to a model: the title first, when there is one."""
        return f"{self.title}\n{self.text}" if self.title.strip() else self.text


@dataclass(frozen=True, slots=True)
class BeirSet:
    name: str
    corpus: list[CorpusDocument]
    queries: dict[str, str]
    """Only the queries that have judgements."""
    qrels: dict[str, dict[str, int]]
    """query id → corpus id → grade (0 = judged not relevant)."""

    def documents(self, user_id: str) -> list[DocumentIn]:
        """The corpus as Engram documents of one tenant, the corpus ids as document ids."""
        return [
            DocumentIn(user_id=user_id, id=doc.id, title=doc.title or None, text=doc.body, source="beir")
            for doc in self.corpus
        ]


def _jsonl(path: Path) -> list[dict[str, object]]:
    if not path.is_file():
        raise InvalidInput(
            f"{path}: not found (a BEIR set holds corpus.jsonl, queries.jsonl, qrels/test.tsv)"
        )
    rows: list[dict[str, object]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{path}:{number}: not JSON: {exc.msg}") from exc
    return rows


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.is_file():
        raise InvalidInput(f"{path}: not found")
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with path.open(encoding="utf-8") as handle:
        for row in csv.reader(handle, delimiter="\t"):
            if len(row) >= 3 and row[0] != "query-id":  # the header line is optional
                qrels[row[0]][row[1]] = int(row[2])
    return dict(qrels)


def load_beir(folder: Path) -> BeirSet:
    qrels = load_qrels(folder / "qrels" / "test.tsv")
    corpus = [
        CorpusDocument(str(row["_id"]), str(row.get("title") or ""), str(row.get("text") or ""))
        for row in _jsonl(folder / "corpus.jsonl")
    ]
    queries = {
        str(row["_id"]): str(row["text"])
        for row in _jsonl(folder / "queries.jsonl")
        if str(row["_id"]) in qrels
    }
    return BeirSet(folder.resolve().name, corpus, queries, {q: qrels[q] for q in queries})
