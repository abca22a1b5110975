"""engram eval's measures against hand-computed values and pytrec_eval, and its BEIR reader."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from shared.evaluation.beir import load_beir
from shared.evaluation.metrics import beir, evaluate, ndcg_at, recall_at

QRELS = {"q1": {"a": 0, "b": 2, "c": 1, "e": 3}, "q2": {"y": 1}}
RUN = {"q1": ["a", "b", "c", "d"], "q2": ["x", "y"]}


def test_ndcg_linear_gains_by_hand() -> None:
    # ideal: grades 3, 2, 1 at ranks 1-3; found: b (2) at rank 2, c (1) at rank 3
    ideal = 3 + 2 / math.log2(3) + 1 / 2
    found = 2 / math.log2(3) + 1 / 2

    assert ndcg_at(RUN["q1"], QRELS["q1"], 10) == pytest.approx(found / ideal)


def test_ndcg_exponential_gains_by_hand() -> None:
    ideal = 7 + 3 / math.log2(3) + 1 / 2
    found = 3 / math.log2(3) + 1 / 2

    assert ndcg_at(RUN["q1"], QRELS["q1"], 10, exponential=True) == pytest.approx(found / ideal)


def test_ndcg_cuts_at_k_and_recall_counts_grades_above_zero() -> None:
    assert ndcg_at(["x", "y"], {"y": 1}, 1) == 0.0
    assert recall_at(RUN["q1"], QRELS["q1"], 2) == pytest.approx(1 / 3)
    assert recall_at(RUN["q1"], QRELS["q1"], 100) == pytest.approx(2 / 3)


def test_our_measures_agree_with_pytrec_eval() -> None:
    ours = evaluate(RUN, QRELS)
    theirs = beir(RUN, QRELS)

    assert theirs == pytest.approx(ours)
    assert theirs["ndcg@10"] == pytest.approx(
        ((found := 2 / math.log2(3) + 0.5) / (3 + 2 / math.log2(3) + 0.5) + 1 / math.log2(3)) / 2
    )
    assert found > 0


def test_a_beir_folder_is_read_with_only_its_judged_queries(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    corpus = [
        {"_id": "d1", "title": "Otters", "text": "They swim."},
        {"_id": "d2", "title": "", "text": "Rivers\u2028flow."},
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "otters"}\n{"_id": "q9", "text": "unjudged"}\n'
    )
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\n")

    dataset = load_beir(tmp_path)

    assert dataset.queries == {"q1": "otters"}
    assert dataset.qrels == {"q1": {"d1": 2}}
    assert [d.text for d in dataset.documents("eval-x")] == ["Otters\nThey swim.", "Rivers\u2028flow."]
    assert {d.user_id for d in dataset.documents("eval-x")} == {"eval-x"}
