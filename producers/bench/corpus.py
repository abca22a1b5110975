"""Corpora of real text nobody here wrote: Debian's package descriptions and the kit's sets.

Debian's descriptions come from ``apt-cache dumpavail`` (package and summary) with the long text
from apt's ``Translation-en`` lists; when the asked size needs more documents than there are
packages, each description is split by paragraph. The kit's sets (``../shared/datasets``: MS
MARCO and DBpedia passages, when present) join them. The pool is de-duplicated by text, shuffled
with a fixed seed and cached under ``.engram-bench/corpus`` (git-ignored), so a corpus of a
smaller size is a prefix of a larger one and a second run builds nothing.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT.parent / "shared" / "datasets"
KIT_SETS = ("msmarco-5k", "dbpedia-5k")
CACHE = ROOT / ".engram-bench" / "corpus"
APT_LISTS = Path("/var/lib/apt/lists")
APT_HELPER = "/usr/lib/apt/apt-helper"
SEED = 16
Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Text:
    id: str
    title: str
    text: str
    source: str


def _stanzas(text: str) -> Iterator[dict[str, str]]:
    """Deb822 stanzas: continuation lines (a leading space) joined to their field with newlines."""
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        last = ""
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and last:
                fields[last] += "\n" + line[1:]
            elif ":" in line:
                last, _, value = line.partition(":")
                fields[last] = value.strip()
        if "Package" in fields:
            yield fields


def _run(command: list[str]) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def _translations() -> list[Path]:
    return sorted(APT_LISTS.glob("*Translation-en*"))


def _apt_update(say: Say) -> None:
    say("corpus: apt's package lists (with English descriptions) are missing: running apt-get update")
    subprocess.run(
        ["apt-get", "-o", "Acquire::Languages=en", "update", "-qq"], check=True, capture_output=True
    )


def debian_packages(say: Say) -> dict[str, tuple[str, str]]:
    """package -> (summary, long description with paragraphs separated by blank lines)."""
    dump = _run(["apt-cache", "dumpavail"])
    if "Package:" not in dump or not _translations():
        _apt_update(say)  # idempotent: apt fetches only what changed
        dump = _run(["apt-cache", "dumpavail"])
    long: dict[str, str] = {}
    for path in _translations():
        for stanza in _stanzas(_run([APT_HELPER, "cat-file", str(path)])):
            _, _, body = stanza.get("Description-en", "").partition("\n")
            paragraphs = [p.strip() for p in body.split("\n.") if p.strip()]
            long.setdefault(stanza["Package"], "\n\n".join(" ".join(p.split()) for p in paragraphs))
    packages: dict[str, tuple[str, str]] = {}
    for stanza in _stanzas(dump):
        summary = stanza.get("Description", "").split("\n")[0].strip()
        if summary:
            packages.setdefault(stanza["Package"], (summary, long.get(stanza["Package"], "")))
    return packages


def debian_texts(packages: dict[str, tuple[str, str]], by_paragraph: bool) -> list[Text]:
    texts: list[Text] = []
    for name, (summary, body) in sorted(packages.items()):
        if not by_paragraph:
            text = f"{name}: {summary}." + (f"\n\n{body}" if body else "")
            texts.append(Text(f"deb-{name}", name, text, "debian"))
            continue
        texts.append(Text(f"deb-{name}-0", name, f"{name}: {summary}.", "debian"))
        for n, paragraph in enumerate(body.split("\n\n"), start=1):
            if paragraph:
                texts.append(Text(f"deb-{name}-{n}", name, f"{name}: {paragraph}", "debian"))
    return texts


def _jsonl(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def kit_texts() -> list[Text]:
    texts: list[Text] = []
    for name in KIT_SETS:
        path = KIT / name / "corpus.jsonl"
        if path.exists():
            for row in _jsonl(path):
                title, body = str(row.get("title") or "").strip(), str(row.get("text") or "").strip()
                text = f"{title}. {body}" if title else body
                texts.append(Text(f"{name}-{row['_id']}", title or name, text, name))
    return texts


def queries(say: Say) -> list[str]:
    """Search texts nobody here wrote, each used once in a run (a query worker caches the
    embeddings of the queries it saw): the kit's queries, then Debian's package summaries in a
    fixed shuffled order. Cached beside the pools."""
    path = CACHE / "queries.txt"
    if path.exists():
        return path.read_text(encoding="utf-8").splitlines()
    found: list[str] = []
    for name in KIT_SETS:
        kit = KIT / name / "queries.jsonl"
        if kit.exists():
            found += [str(row["text"]) for row in _jsonl(kit)]
    summaries = sorted({summary for summary, _ in debian_packages(say).values()})
    random.Random(SEED).shuffle(summaries)
    texts = list(dict.fromkeys(" ".join(q.split()) for q in found + summaries if len(q.strip()) > 3))
    _write(path, [text + "\n" for text in texts])
    return texts


def _write(path: Path, lines: list[str]) -> None:
    """Whole or not at all: a run stopped midway leaves no half a cache."""
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE.parent / ".gitignore").write_text("*\n")
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.writelines(lines)
    tmp.replace(path)


def _pool(by_paragraph: bool, say: Say) -> list[Text]:
    path = CACHE / ("pool-paragraphs.jsonl" if by_paragraph else "pool-whole.jsonl")
    if path.exists():
        return [Text(**row) for row in _jsonl(path)]  # type: ignore[arg-type]
    say(f"corpus: building the {'paragraph' if by_paragraph else 'package'} pool (cached in {path})")
    seen: set[str] = set()
    pool: list[Text] = []
    for text in debian_texts(debian_packages(say), by_paragraph) + kit_texts():
        key = " ".join(text.text.lower().split())
        if key not in seen and len(key) > 12:
            seen.add(key)
            pool.append(text)
    random.Random(SEED).shuffle(pool)
    _write(path, [json.dumps(asdict(text), ensure_ascii=False) + "\n" for text in pool])
    return pool


def corpus(size: int, say: Say) -> list[Text]:
    """``size`` distinct texts: whole descriptions while there are enough, else paragraphs."""
    for by_paragraph in (False, True):
        pool = _pool(by_paragraph, say)
        if len(pool) >= size:
            return pool[:size]
    raise ValueError(f"the corpus holds {len(pool)} texts, fewer than the {size} asked")
