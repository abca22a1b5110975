"""A LoCoMo-layout conversation set (a JSON list of samples), as a chat client would post it.

Each sample is one conversation: ``conversation`` holds ``speaker_a``, ``speaker_b``,
``session_N`` (a list of turns ``{speaker, dia_id, text}``) and ``session_N_date_time`` (e.g.
``1:56 pm on 8 May, 2023``); ``qa`` holds ``{question, answer, evidence, category}``, evidence
being the ``dia_id``s of the turns that hold the answer. Category 5 (adversarial: no answer in
the conversation) and questions without evidence are left out of recall.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from shared.errors import InvalidInput
from shared.models import DocumentIn

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SESSION_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_SESSION = re.compile(r"^session_(\d+)$")


def session_date(text: str) -> datetime:
    """``1:56 pm on 8 May, 2023`` → 2023-05-08 13:56 UTC (LoCoMo's one format)."""
    try:
        return datetime.strptime(" ".join(text.split()), SESSION_DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError as exc:
        raise InvalidInput(f"session date {text!r}: not like '1:56 pm on 8 May, 2023'") from exc


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]

    def session_id(self, session: int) -> str:
        return f"{self.sample_id}-session-{session}"

    def documents(self, user_id: str) -> list[DocumentIn]:
        """Each turn one document: id = dia_id, text "<speaker>: <text>", memory_type ``turn``,
        its session, and the session's date plus one second per turn's place."""
        return [
            DocumentIn(
                user_id=user_id,
                id=turn.dia_id,
                text=f"{turn.speaker}: {turn.text}",
                memory_type="turn",
                session_id=self.session_id(turn.session),
                created_at=turn.created_at,
                source="locomo",
            )
            for turn in self.turns
        ]


@dataclass(frozen=True, slots=True)
class LocomoSet:
    name: str
    conversations: list[Conversation]

    def tenant(self, conversation: Conversation) -> str:
        return f"eval-{self.name}-{conversation.sample_id}"

    @property
    def turns(self) -> int:
        return sum(len(c.turns) for c in self.conversations)

    @property
    def questions(self) -> int:
        return sum(len(c.questions) for c in self.conversations)


def _evidence(value: Any) -> tuple[str, ...]:
    """The evidence ids, each once; an entry naming two turns ("D8:6; D9:17") counts as both."""
    ids: dict[str, None] = {}
    for entry in value or ():
        for part in str(entry).split(";"):
            if part.strip():
                ids.setdefault(part.strip(), None)
    return tuple(ids)


def _conversation(sample: Mapping[str, Any], number: int) -> Conversation:
    sample_id = str(sample.get("sample_id") or f"conv-{number}")
    body = sample.get("conversation")
    if not isinstance(body, Mapping):
        raise InvalidInput(f"sample {sample_id}: no 'conversation' object")
    turns: list[Turn] = []
    sessions = sorted(int(m.group(1)) for key in body if (m := _SESSION.match(str(key))))
    for session in sessions:
        date_text = body.get(f"session_{session}_date_time")
        if not isinstance(date_text, str):
            raise InvalidInput(f"sample {sample_id}: session_{session} has no session_{session}_date_time")
        start = session_date(date_text)
        for place, turn in enumerate(body[f"session_{session}"]):
            turns.append(
                Turn(
                    dia_id=str(turn["dia_id"]),
                    speaker=str(turn["speaker"]),
                    text=str(turn.get("text") or ""),
                    session=session,
                    created_at=start + timedelta(seconds=place),
                )
            )
    questions = [
        Question(f"{sample_id}/{i}", str(qa["question"]), int(qa["category"]), _evidence(qa.get("evidence")))
        for i, qa in enumerate(sample.get("qa") or ())
        if int(qa.get("category", 0)) in CATEGORIES and _evidence(qa.get("evidence"))
    ]
    return Conversation(sample_id, turns, questions)


def is_locomo(path: Path) -> bool:
    return path.is_file() and path.suffix == ".json"


def locomo_file(path: Path) -> Path | None:
    """The LoCoMo JSON a path names: the file itself, or the one ``.json`` in a folder that is
    not a BEIR set."""
    if is_locomo(path):
        return path
    if path.is_dir() and not (path / "corpus.jsonl").exists():
        files = sorted(path.glob("*.json"))
        if len(files) == 1:
            return files[0]
    return None


def load_locomo(path: Path) -> LocomoSet:
    try:
        samples = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{path}: not a LoCoMo JSON file: {exc}") from exc
    if not isinstance(samples, list):
        raise InvalidInput(f"{path}: a LoCoMo file is a JSON list of samples")
    name = path.parent.name if path.parent.name else path.stem
    return LocomoSet(name, [_conversation(sample, n) for n, sample in enumerate(samples)])


def evidence_recall(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """The share of the evidence turns among the first k distinct documents."""
    if not evidence:
        return 0.0
    first: list[str] = []
    for document in ranked:
        if document not in first:
            first.append(document)
            if len(first) == k:
                break
    return len(set(first) & set(evidence)) / len(set(evidence))


def recall_report(
    runs: Mapping[str, Sequence[str]], questions: Sequence[Question], ks: Sequence[int] = (5, 10, 20)
) -> dict[str, float]:
    """Evidence recall@k over all questions (``recall@10``) and per category
    (``recall@10/temporal``), each a mean over its questions."""
    report: dict[str, float] = {}
    groups: dict[str, list[Question]] = {"": list(questions)}
    for category, label in CATEGORIES.items():
        groups[f"/{label}"] = [q for q in questions if q.category == category]
    for suffix, group in groups.items():
        if not group:
            continue
        for k in ks:
            values = [evidence_recall(runs.get(q.id, ()), q.evidence, k) for q in group]
            report[f"recall@{k}{suffix}"] = sum(values) / len(values)
    return report
