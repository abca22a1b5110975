"""The bench's instant-embedder phase alone, on a stack ``engram bench --keep`` left running:
the stack's CPU a chunk by role (Neo4j, the write worker, ...) for a change to the write path,
measured before and after on the same store without a whole bench between.

    .venv/bin/engram bench --sizes 10 --searches 2 --ports "6681 7981 6581" --keep \\
        --skip throughput,write_to_searchable,tenants,recall,reconcile,fallback,rss,instant
    .venv/bin/python ops/bench/instant_phase.py --documents 2000 --offset 0     # before
    .venv/bin/python ops/bench/instant_phase.py --documents 2000 --offset 2000  # after

The workers are restarted at the start of each run, so they run the code checked out then. Each
run takes fresh texts (``--offset``) under a tenant of its own and prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from pathlib import Path

from producers.bench import corpus, instant
from producers.bench.run import _documents, say
from producers.bench.stack import ROOT, OwnStack, Ports
from producers.client import EngramClient
from shared.container import Container
from workers.app import make_app


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--documents", type=int, default=2000)
    parser.add_argument("--offset", type=int, default=0, help="skip this many corpus texts first")
    parser.add_argument("--ports", type=Ports.parse, default=Ports.parse("6681 7981 6581"))
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".engram-bench" / "stack")
    args = parser.parse_args()
    stack = OwnStack(args.data_dir, args.ports, say)
    settings = stack.settings
    client = EngramClient(settings, app=make_app(settings))
    texts = corpus.corpus(args.offset + args.documents, say)
    prefix = f"instant-{uuid.uuid4().hex[:6]}"
    documents = [
        d.model_copy(update={"user_id": f"{prefix}-instant"}) for d in _documents(texts, args.offset, prefix)
    ]
    load = os.getloadavg()
    dimension = Container(settings).embedder.dimension
    result = instant.measure(
        client, settings.data_dir, documents, dimension, stack.restart_services, say, 3600.0
    )
    chunks = max(1, int(result["chunks"]))
    result["cpu_ms_per_chunk"] = {role: round(1000 * s / chunks, 2) for role, s in result["cpu_s"].items()}
    result["load_average"] = {"before": load, "after": os.getloadavg()}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
