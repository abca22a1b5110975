"""engram eval on a tiny BEIR-layout folder: ingested through the queues, then measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from producers import evaluate
from producers.cli import main

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
            json.dumps({"_id": i, "title": t, "text": x, "metadata": {}}) + "\n"
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
    assert report.latency_ms["p99"] >= report.latency_ms["p50"] > 0

    # And a second run with --reuse skips the ingest and prints the JSON object
    capsys.readouterr()
    assert main(["eval", str(folder), "--reuse", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) >= {"dataset", "methods", "latency_ms"}
    assert printed["dataset"] == tenant
    assert set(printed["methods"]) == {"bm25", "vector", "rrf", "engram"}
    assert set(printed["methods"]["engram"]) == {"ndcg@10", "recall@10", "recall@100"}
    assert printed["ingest_s"] is None
