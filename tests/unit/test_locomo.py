"""The LoCoMo reader (turns as a chat client posts them) and evidence recall, by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.errors import InvalidInput
from shared.evaluation.locomo import (
    Question,
    evidence_recall,
    load_locomo,
    locomo_file,
    recall_report,
    session_date,
)

SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_2_date_time": "10:05 am on 3 June, 2023",
        "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "I moved to Lisbon."}],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "What is its name?", "blip_caption": "a cat"},
        ],
    },
    "qa": [
        {"question": "Where did Ben move?", "answer": "Lisbon", "evidence": ["D2:1"], "category": 4},
        {"question": "What did Ana adopt and Ben ask?", "evidence": ["D1:1; D1:2"], "category": 1},
        {"question": "Who is the president?", "evidence": ["D1:1"], "category": 5},
        {"question": "No evidence given", "evidence": [], "category": 2},
    ],
}


def locomo(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny-locomo"
    folder.mkdir()
    path = folder / "tiny.json"
    path.write_text(json.dumps([SAMPLE]))
    return path


def test_session_dates_are_read_in_locomos_format() -> None:
    assert session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert session_date("12:09 am on 13 September,  2023") == datetime(2023, 9, 13, 0, 9, tzinfo=UTC)
    with pytest.raises(InvalidInput, match="session date"):
        session_date("yesterday")


def test_each_turn_is_one_document_of_its_session_said_one_second_after_the_last(tmp_path: Path) -> None:
    dataset = load_locomo(locomo(tmp_path))
    (conversation,) = dataset.conversations
    documents = conversation.documents(dataset.tenant(conversation))

    assert dataset.name == "tiny-locomo" and dataset.tenant(conversation) == "eval-tiny-locomo-conv-x"
    assert [d.id for d in documents] == ["D1:1", "D1:2", "D2:1"]  # sessions in their order
    assert [d.text for d in documents] == [
        "Ana: I adopted a cat.",
        "Ben: What is its name?",
        "Ben: I moved to Lisbon.",
    ]
    assert {d.memory_type for d in documents} == {"turn"}
    assert [d.session_id for d in documents] == ["conv-x-session-1", "conv-x-session-1", "conv-x-session-2"]
    assert [d.created_at for d in documents] == [
        datetime(2023, 5, 8, 13, 56, 0, tzinfo=UTC),
        datetime(2023, 5, 8, 13, 56, 1, tzinfo=UTC),
        datetime(2023, 6, 3, 10, 5, 0, tzinfo=UTC),
    ]
    assert {d.user_id for d in documents} == {"eval-tiny-locomo-conv-x"}


def test_only_categories_one_to_four_with_evidence_are_questions(tmp_path: Path) -> None:
    (conversation,) = load_locomo(locomo(tmp_path)).conversations

    assert [(q.text, q.category, q.evidence) for q in conversation.questions] == [
        ("Where did Ben move?", 4, ("D2:1",)),
        ("What did Ana adopt and Ben ask?", 1, ("D1:1", "D1:2")),  # "a; b" names two turns
    ]


def test_a_folder_holding_one_json_is_a_locomo_set_and_a_beir_folder_is_not(tmp_path: Path) -> None:
    path = locomo(tmp_path)
    assert locomo_file(path) == path
    assert locomo_file(path.parent) == path
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text("")
    (beir / "extra.json").write_text("[]")
    assert locomo_file(beir) is None


def test_a_file_that_is_no_list_of_samples_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"qa": []}')
    with pytest.raises(InvalidInput, match="list of samples"):
        load_locomo(path)


def test_evidence_recall_counts_distinct_documents_by_hand() -> None:
    ranked = ["a", "a", "x", "b", "y", "c"]
    assert evidence_recall(ranked, ("a", "b", "c"), 2) == pytest.approx(1 / 3)  # a, x
    assert evidence_recall(ranked, ("a", "b", "c"), 3) == pytest.approx(2 / 3)  # a, x, b
    assert evidence_recall(ranked, ("a", "b", "c"), 20) == 1.0
    assert evidence_recall([], ("a",), 5) == 0.0


def test_recall_report_averages_over_questions_overall_and_per_category() -> None:
    questions = [
        Question("q1", "?", 4, ("a",)),
        Question("q2", "?", 4, ("b",)),
        Question("q3", "?", 2, ("c", "d")),
    ]
    runs = {"q1": ["a"], "q2": ["x", "y", "z", "w", "v", "b"], "q3": ["c"]}

    report = recall_report(runs, questions)

    assert report["recall@5"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert report["recall@10"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert report["recall@5/single-hop"] == pytest.approx(0.5)
    assert report["recall@10/temporal"] == pytest.approx(0.5)
    assert "recall@10/multi-hop" not in report  # no question of that category
