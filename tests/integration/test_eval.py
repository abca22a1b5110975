"""engram eval on a tiny BEIR-layout folder: ingested through the queues, then measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from producers.cli import evaluate, main

pytestmark = pytest.mark.integration

CORPUS = {
    "otter": ("Otters", "Sea otters float on their backs and crack shellfish on their chests."),
    "press": ("Printing press", "Gutenberg's press spread printed books across Europe."),
    "glacier": ("", "Glaciers carve U-shaped valleys as they slide slowly downhill."),
    "coffee": ("Coffee", "Too fine a grind makes coffee taste bitter."),
}
QUERIES = {"q1": "how do sea otters eat shellfish", "q2": "who spread printed books in Europe"}
QRELS = [("q1", "otter", 2), ("q1", "coffee", 0), ("q2", "press", 1)]


def beir_folder(root: Path, name: str) -> Path:
    folder = root / name
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(
            # titles made unique per folder: another test makes Document titles a unique constraint
            json.dumps({"_id": i, "title": f"{t} ({name})" if t else "", "text": x, "metadata": {}}) + "\n"
            for i, (t, x) in CORPUS.items()
        )
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items())
    )
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in QRELS]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


def test_eval_ingests_a_beir_folder_then_reuses_it_and_prints_one_json_object(
    api: TestClient, tmp_path: Path, tenant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = beir_folder(tmp_path, tenant)

    # When a set is evaluated the first time, it is ingested through the queues into its tenant
    report = evaluate.run(folder, reuse=True, out=print)
    assert report.ingest_s is not None and report.documents == 4 and report.queries == 2
    for method in (*evaluate.METHODS, *evaluate.ABLATION):
        assert report.methods[method]["recall@100"] == 1.0, method
    assert report.methods["engram"]["ndcg@10"] == 1.0
    for method in (*evaluate.METHODS, *evaluate.ABLATION):
        latency = report.latency_ms[method]
        assert latency["p99"] >= latency["p95"] >= latency["p50"] > 0, method
        assert len(report.latencies_default[method]) == 2, method  # again at top_k 10
    # And a second run with --reuse skips the ingest and prints the JSON object
    capsys.readouterr()
    assert main(["eval", str(folder), "--reuse", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) >= {"dataset", "methods", "latency_ms"} and printed["kind"] == "beir"
    assert printed["dataset"] == tenant
    assert set(printed["methods"]) == {"bm25", "vector", "rrf", "engram"}
    assert set(printed["methods"]["engram"]) == {"ndcg@10", "recall@10", "recall@100"}
    assert printed["ingest_s"] is None


# A tiny conversation in LoCoMo's layout, made up for this test (the real set is CC BY-NC and never
# enters the repository).
CONVERSATION = {
    "sample_id": "chat-1",
    "conversation": {
        "speaker_a": "Nora",
        "speaker_b": "Omar",
        "session_1_date_time": "9:15 am on 2 March, 2024",
        "session_1": [
            {
                "speaker": "Nora",
                "dia_id": "D1:1",
                "text": "I started pottery classes at the community studio.",
            },
            {"speaker": "Omar", "dia_id": "D1:2", "text": "Nice! I am training for the Porto half marathon."},
        ],
        "session_2_date_time": "6:40 pm on 20 April, 2024",
        "session_2": [
            {"speaker": "Nora", "dia_id": "D2:1", "text": "My first glazed bowl came out of the kiln today."},
            {"speaker": "Omar", "dia_id": "D2:2", "text": "I finished the marathon in one hour fifty."},
        ],
    },
    "qa": [
        {
            "question": "What classes did Nora start?",
            "answer": "pottery",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {"question": "When did Omar finish the marathon?", "evidence": ["D2:2"], "category": 2},
        {"question": "What did Nora make in pottery?", "evidence": ["D1:1", "D2:1"], "category": 1},
        {"question": "What is Omar's favourite colour?", "evidence": [], "category": 5},
    ],
}


def locomo_file(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    path = folder / "conversations.json"
    path.write_text(json.dumps([CONVERSATION]))
    return path


def test_eval_posts_each_turn_with_its_session_and_moment_and_measures_evidence_recall(
    api: TestClient, tmp_path: Path, tenant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = locomo_file(tmp_path, tenant)

    # When a LoCoMo set is evaluated, each turn goes through the queues into its conversation's tenant
    report = evaluate.run(path, reuse=True, out=print)
    conversation_tenant = f"eval-{tenant}-chat-1"
    assert report.kind == "locomo" and report.documents == 4 and report.queries == 3
    assert report.ingest_s is not None

    # Then the turns are stored as a chat client would post them: a turn each, its session, its moment
    turn = api.get("/api/memories", params={"user_id": conversation_tenant, "document_id": "D2:2"}).json()
    (memory,) = turn["memories"]
    assert memory["memory_type"] == "turn" and memory["session_id"] == "chat-1-session-2"
    assert memory["content"] == "Omar: I finished the marathon in one hour fifty."
    assert memory["created_at"].startswith("2024-04-20T18:40:01")

    # And evidence recall is measured for every method, overall and per category
    for method in (*evaluate.METHODS, *evaluate.ABLATION):
        values = report.methods[method]
        assert values["recall@20"] == 1.0, method  # four turns: every evidence turn is in the first 20
        assert values["recall@5"] == values["recall@20"], method
        assert set(values) >= {"recall@10/single-hop", "recall@10/temporal", "recall@10/multi-hop"}
        assert report.latency_ms[method]["p50"] > 0
    assert report.methods["bm25"]["recall@10/single-hop"] == 1.0

    # And --reuse --json skips the ingest and prints one object with methods.<name>.recall@10
    capsys.readouterr()
    assert main(["eval", str(path), "--reuse", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["kind"] == "locomo" and printed["ingest_s"] is None
    assert set(printed["methods"]) == {"bm25", "vector", "rrf", "engram"}
    assert printed["methods"]["engram"]["recall@10"] == 1.0
    assert set(printed["methods"]["engram"]) == {"recall@5", "recall@10", "recall@20"}


def test_eval_suite_runs_every_set_in_a_folder_and_prints_one_table(
    api: TestClient, tmp_path: Path, tenant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite"
    beir_folder(suite, f"{tenant}-beir")
    locomo_file(suite, f"{tenant}-chat")
    (suite / "README.md").write_text("not a set")

    # When a folder of sets is evaluated as a suite
    capsys.readouterr()
    assert main(["eval", "--suite", str(suite), "--reuse"]) == 0
    table = capsys.readouterr().out.strip().splitlines()

    # Then one table gives every method's headline measure per set, and its latency
    header = next(line for line in reversed(table) if line.startswith("method"))
    assert f"{tenant}-beir nDCG@10" in header and f"{tenant}-chat R@10" in header and "p95 ms" in header
    rows = table[table.index(header) + 1 : table.index(header) + 7]
    assert [row[:40].strip() for row in rows] == [
        evaluate.LABELS[m] for m in ("bm25", "vector", "rrf", "weighted_rrf", "blend", "engram")
    ]
    engram = rows[-1][40:].split()
    assert float(engram[0]) == 1.0 and float(engram[1]) > 0  # the BEIR set's nDCG@10, the chat's R@10

    # And --json gives the same as one object: methods x sets, and latency per method
    assert main(["eval", "--suite", str(suite), "--reuse", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed["sets"]) == {f"{tenant}-beir", f"{tenant}-chat"}
    assert printed["table"]["engram"][f"{tenant}-beir"] == 1.0
    assert printed["table"]["bm25"][f"{tenant}-chat"] == 1.0
    assert printed["latency_ms"]["engram"]["p95"] >= printed["latency_ms"]["engram"]["p50"] > 0
    assert printed["latency_top10_ms"]["vector"]["p50"] > 0
