"""The Python half of ops/n8n-check: fills in the workflow and credential templates of docs/n8n/,
reads n8n's execution output, waits on Engram's API, and counts the documents' points in the
backup through the configured engine's adapter (``connect_vectors``, by the container), never by
opening a folder: a check that opened local mode's folder found nothing once Edge was the default.
Each subcommand prints what it checked and exits 1 when a check fails.

.venv/bin/python ops/n8n_check.py prepare DOCS OUT API_URL < key.json    (engram keys create --json)
.venv/bin/python ops/n8n_check.py ids EXECUTION.json NODE
.venv/bin/python ops/n8n_check.py wait API_URL KEY_FILE STATE.json ID...
.venv/bin/python ops/n8n_check.py found EXECUTION.json NODE ID...
.venv/bin/python ops/n8n_check.py qdrant TENANT STATE.json
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

if TYPE_CHECKING:
    from shared.stores.base import VectorConnection

# What the templates hold in place of the instance's own values.
TEMPLATE_URL = "http://127.0.0.1:8000"
PLACEHOLDERS = {"api_key": "REPLACE_WITH_API_KEY", "secret": "REPLACE_WITH_SIGNING_SECRET"}
KEY_ID = "REPLACE_WITH_KEY_ID"


def fail(message: str) -> None:
    print(f"n8n-check: FAILED: {message}", file=sys.stderr)
    raise SystemExit(1)


def prepare(docs: Path, out: Path, api_url: str) -> None:
    """Writes the workflows with this stack's URL and key id, and the credentials with the key and
    signing secret read from stdin (never from a command line), readable by this user only."""
    made = json.load(sys.stdin)
    key, secret, key_id = made["key"], made["signing_secret"], made["info"]["id"]
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    workflows = out / "workflows"
    workflows.mkdir(mode=0o700, exist_ok=True)
    for path in sorted((docs / "workflows").glob("engram-*.json")):
        text = path.read_text().replace(TEMPLATE_URL, api_url).replace(KEY_ID, key_id)
        (workflows / path.name).write_text(text)
    text = (docs / "credentials.template.json").read_text()
    text = text.replace(PLACEHOLDERS["api_key"], key).replace(PLACEHOLDERS["secret"], secret)
    credentials = out / "credentials.json"
    credentials.touch(mode=0o600)
    credentials.write_text(text)
    print(f"workflows and credentials for {api_url} (key {key_id}) in {out}")


def output_items(execution: Path, node: str) -> list[dict[str, Any]]:
    """The items a node put out in an ``n8n execute --rawOutput`` answer; fails unless it ran."""
    text = execution.read_text()
    try:
        # n8n may log a line or two before the JSON: it begins at the first "{" of a line.
        start = text.index("\n{") + 1 if not text.startswith("{") else 0
        answer = json.loads(text[start:])
    except ValueError:
        fail(f"{execution} holds no execution JSON:\n{text[-2000:]}")
    if answer.get("status") != "success":
        fail(f"the execution's status is {answer.get('status')!r}")
    runs = answer["data"]["resultData"]["runData"].get(node)
    if not runs:
        fail(f"node {node!r} did not run")
    items: list[dict[str, Any]] = runs[-1]["data"]["main"][0]
    return [item["json"] for item in items]


def ids(execution: Path, node: str) -> None:
    for answer in output_items(execution, node):
        for document_id in answer["document_ids"]:
            print(document_id)


def wait(api_url: str, key_file: Path, state: Path, document_ids: list[str], timeout_s: float = 300) -> None:
    """Each document ``done`` and every chunk synced to Qdrant (``vector_sync``), as the API says."""
    headers = {"X-API-Key": key_file.read_text().strip()}
    deadline = time.monotonic() + timeout_s
    statuses: dict[str, dict[str, Any]] = {}
    with httpx.Client(base_url=api_url, headers=headers, timeout=30) as client:
        for document_id in document_ids:
            while True:
                response = client.get(f"/api/documents/{quote(document_id, safe='')}")
                status: dict[str, Any] = {"state": f"HTTP {response.status_code}"}
                if response.status_code == 200:
                    status = response.json()
                sync: dict[str, Any] = status.get("vector_sync") or {}
                finished = status["state"] in ("done", "failed") and sync.get("pending") == 0
                if finished or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            statuses[document_id] = status
            print(
                f"  {document_id}: state={status['state']} chunks={status.get('chunks')} "
                f"vector_sync={json.dumps(sync, separators=(',', ':'))}"
            )
    state.write_text(json.dumps(statuses))
    for document_id, status in statuses.items():
        sync = status.get("vector_sync") or {}
        synced = status.get("chunks") and sync.get("synced") == status["chunks"]
        if status["state"] != "done" or not synced:
            fail(f"{document_id} is not done and synced: {status}")


def found(execution: Path, node: str, document_ids: list[str]) -> None:
    """Every document is among the search workflow's results."""
    results = output_items(execution, node)
    ranked = [result["document_id"] for result in results]
    for rank, result in enumerate(results, 1):
        print(f"  {rank}. {result['document_id']}  score={result['score']:.3f}  {result['content'][:60]!r}")
    missing = [document_id for document_id in document_ids if document_id not in ranked]
    if missing:
        fail(f"the search workflow did not return {missing}")


def backup_counts(vectors: VectorConnection, tenant: str, page: int = 256) -> Counter[str]:
    """The tenant's points per document, in every model's collection the backup holds, read
    through the adapter of the configured engine (Edge's folder, local mode's, or a server)."""
    counts: Counter[str] = Counter()
    for model, dimension in vectors.models():
        store = vectors.store(model, dimension)
        after: str | None = None
        while True:
            rows, after = store.scroll_payloads(after, page, ["document_id"], user_id=tenant)
            counts.update(str(payload.get("document_id")) for _, payload in rows)
            if after is None:
                break
    return counts


def qdrant(tenant: str, state: Path) -> None:
    """Counts each document's points in the backup, as many as the document has chunks. An
    embedded engine's folder has one owner: the stack is stopped first (ops/n8n-check does)."""
    from shared.container import Container
    from shared.settings import get_settings
    from shared.stores.folders import embedded_folder

    settings = get_settings()
    statuses: dict[str, dict[str, Any]] = json.loads(state.read_text())
    container = Container(settings)
    try:
        counts = backup_counts(container.qdrant, tenant)
    finally:
        container.close()
    engine = "a server" if settings.qdrant_url else f"engine {settings.qdrant_engine}"
    print(f"  the backup: {engine} at {settings.qdrant_url or embedded_folder(settings)}")
    for document_id, status in statuses.items():
        points = counts[document_id]
        print(f"  {document_id}: {points} point(s) in Qdrant, {status['chunks']} chunk(s) in Neo4j")
        if points != status["chunks"]:
            fail(f"{document_id} has {points} points in Qdrant, not {status['chunks']}")


def main(argv: list[str]) -> None:
    command, args = argv[0], argv[1:]
    if command == "prepare":
        prepare(Path(args[0]), Path(args[1]), args[2])
    elif command == "ids":
        ids(Path(args[0]), args[1])
    elif command == "wait":
        wait(args[0], Path(args[1]), Path(args[2]), args[3:])
    elif command == "found":
        found(Path(args[0]), args[1], args[2:])
    elif command == "qdrant":
        qdrant(args[0], Path(args[1]))
    else:
        fail(f"unknown command {command!r}")


if __name__ == "__main__":
    os.umask(0o077)
    main(sys.argv[1:])
