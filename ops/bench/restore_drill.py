"""The restore drill: the primary's data lost, and brought back from Qdrant alone, timed.

    .venv/bin/python ops/bench/restore_drill.py            # on the stack ENGRAM_* names (ops/demo's)
    .venv/bin/python ops/bench/restore_drill.py --yes      # without asking first

DESTRUCTIVE: it stops Neo4j, moves its data folder aside (kept as neo4j-data-drill-<time> in the
data folder: delete it once satisfied) and starts it empty, as an operator's disk loss would. Then:
a reconcile pass while the primary is wiped (it must delete nothing), `engram restore`, a reconcile
pass (it must find parity), and every Memory compared with what Neo4j held before the loss (ids,
texts, versions, content hashes, documents, NEXT links and vectors).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import neo4j

from shared.settings import Settings, get_settings

ROOT = Path(__file__).resolve().parents[2]
ENGRAM = str(Path(sys.executable).with_name("engram"))
SNAPSHOT = """
MATCH (m:Memory)
OPTIONAL MATCH (d:Document)-[:HAS_CHUNK]->(m)
OPTIONAL MATCH (m)-[:NEXT]->(n:Memory)
RETURN m.id AS id, m.user_id AS user_id, m.content AS content, m.version AS version,
       m.content_hash AS hash, m.embedding AS embedding, d.id AS document, n.id AS next,
       d.title AS title, d.source AS source, d.metadata AS metadata, m.created_at AS created_at,
       m.updated_at AS updated_at, m.tags AS tags, m.importance AS importance, m.title AS memory_title,
       m.project_id AS project_id, d.created_at AS document_created_at, d.ingested_at AS ingested_at,
       d.uri AS uri, m.chunk_index AS chunk_index, m.token_count AS token_count
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--yes", action="store_true", help="do not ask before wiping Neo4j")
    args = parser.parse_args()
    settings = get_settings()
    if not args.yes and input(f"wipe Neo4j of {settings.data_dir}? [y/N] ").strip().lower() != "y":
        return 1
    figures: dict[str, Any] = {}
    before = _snapshot(settings)
    figures["memories_before"] = len(before)
    _engram("reconcile")  # the stores found in step: Qdrant records the primary's store id

    started = time.monotonic()
    _ops("neo4j_stop")
    lost = settings.data_dir / f"neo4j-data-drill-{int(time.time())}"
    (settings.data_dir / "neo4j" / "data").rename(lost)
    _ops("neo4j_start")
    figures["wipe_s"] = round(time.monotonic() - started, 1)

    wiped = json.loads(_engram("reconcile", check=False))
    figures["pass_while_wiped"] = {
        "primary_lost": wiped.get("primary_lost"),
        "orphans_found": wiped["drift_found"]["orphan_points"],
        "orphans_deleted": wiped["drift_fixed"]["orphan_points"],
        "qdrant_points": wiped.get("qdrant_points"),
    }
    status = subprocess.run([ENGRAM, "status"], capture_output=True, text=True, check=False)
    figures["status_while_wiped"] = status.stderr.strip().splitlines()

    started = time.monotonic()
    report = json.loads(_engram("restore", "--json", check=False))
    figures["restore_s"] = round(time.monotonic() - started, 1)
    figures["restore"] = {k: report[k] for k in ("restored", "documents", "synced", "unreadable_count")}
    started = time.monotonic()
    after_pass = json.loads(_engram("reconcile"))
    figures["reconcile_after_s"] = round(time.monotonic() - started, 1)
    figures["reconcile_after"] = {
        "drift_found": after_pass["drift_found"],
        "primary_lost": after_pass["primary_lost"],
        "qdrant_points": after_pass["qdrant_points"],
        "neo4j_memories": after_pass["neo4j_memories"],
    }

    after = _snapshot(settings)
    figures["memories_after"] = len(after)
    figures["compared"] = _compare(before, after)
    figures["lost_data_kept_in"] = str(lost)
    print(json.dumps(figures, indent=2, default=str))
    compared = figures["compared"]
    ok = (
        compared["missing"] == 0
        and compared["different"] == 0
        and figures["pass_while_wiped"]["orphans_deleted"] == 0
    )
    return 0 if ok else 1


def _snapshot(settings: Settings) -> dict[str, dict[str, Any]]:
    auth = (settings.neo4j_user, settings.neo4j_password.get_secret_value())
    with neo4j.GraphDatabase.driver(settings.neo4j_uri, auth=auth) as driver:
        records, _, _ = driver.execute_query(SNAPSHOT, database_=settings.neo4j_database)
    return {r["id"]: r.data() for r in records}


def _compare(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> dict[str, Any]:
    missing = [i for i in before if i not in after]
    different: list[str] = []
    by_field: Counter[str] = Counter()
    worst = 0.0
    for memory_id, old in before.items():
        new = after.get(memory_id)
        if new is None:
            continue
        fields = [key for key in old if key not in ("id", "embedding")]
        differing = [k for k in fields if old[k] != new[k]]
        if differing or len(old["embedding"]) != len(new["embedding"]):
            different.append(memory_id)
            by_field.update(differing or ["embedding length"])
            continue
        worst = max(worst, max(abs(a - b) for a, b in zip(old["embedding"], new["embedding"], strict=True)))
    return {
        "memories": len(before),
        "missing": len(missing),
        "extra": len([i for i in after if i not in before]),
        "different": len(different),
        "fields_compared": sorted(k for k in next(iter(before.values()), {}) if k != "id"),
        "different_by_field": dict(by_field),
        "largest_vector_difference": worst if not math.isnan(worst) else None,
        "examples": (missing + different)[:5],
    }


def _engram(*argv: str, check: bool = True) -> str:
    done = subprocess.run([ENGRAM, *argv], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"engram {' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def _ops(function: str) -> None:
    script = f"source ops/lib/neo4j.sh && source ops/lib/common.sh && {function}"
    subprocess.run(["bash", "-c", script], cwd=ROOT, env=os.environ.copy(), check=True, timeout=300)


if __name__ == "__main__":
    raise SystemExit(main())
