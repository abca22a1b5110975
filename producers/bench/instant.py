"""The pipeline once more against an instant embedder: the stack's own ceiling, what a GPU meets.

With a GPU embedder (TEI, an OpenAI-compatible server) the model's share of a chunk goes to nearly
nothing and the stack's own CPU is the whole ceiling. The bench measures that ceiling by pointing
the embed stage at a stub TEI server it runs in this process (``POST /embed``), which answers
every text at once with one of a few fixed unit vectors (picked by the text's CRC, so the vector
index does not meet one vector repeated). The stub's CPU is this process's, not the stack's.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import numpy as np

from producers.bench import ingest
from producers.bench.processes import cpu_by_role, cpu_spent
from producers.client import EngramClient
from shared.ids import document_key
from shared.models import DocumentIn

DOCUMENTS = 5000
"""Most documents the instant run ingests: at hundreds of chunks a second, seconds of wall."""
WARMUP = 64
"""Documents through the restarted workers first (their tokenizer, connections), not measured."""
VECTORS = 256


class StubTei:
    """A TEI server that answers at once: ``POST /embed`` with ``{"inputs": [...]}``."""

    def __init__(self, dimension: int) -> None:
        rng = np.random.default_rng(28)
        pool = rng.standard_normal((VECTORS, dimension)).astype(np.float32)
        pool /= np.linalg.norm(pool, axis=1, keepdims=True)
        rows = [json.dumps([round(float(x), 6) for x in row]).encode() for row in pool]
        self.texts = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                inputs = body.get("inputs") if isinstance(body, dict) else None
                if self.path != "/embed" or not isinstance(inputs, list):
                    self.send_error(422, "expected POST /embed with a list of inputs")
                    return
                stub.texts += len(inputs)
                answer = b"[" + b",".join(rows[zlib.crc32(str(t).encode()) % VECTORS] for t in inputs) + b"]"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-tei", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def embedder_env(url: str, dimension: int) -> dict[str, str]:
    """The settings that point a worker's embedder at the stub."""
    return {
        "ENGRAM_EMBEDDING_BACKEND": "tei",
        "ENGRAM_EMBEDDING_URL": url,
        "ENGRAM_EMBEDDING_DIMENSION": str(dimension),
    }


def measure(
    client: EngramClient,
    data_dir: Path,
    documents: Sequence[DocumentIn],
    dimension: int,
    restart: Callable[[dict[str, str]], None],
    say: Callable[[str], None],
    timeout_s: float,
) -> dict[str, Any]:
    """Ingests ``documents`` (at most ``DOCUMENTS``) with the workers restarted by ``restart`` on
    the stub's settings; ``restart({})`` puts them back as configured, whatever happened."""
    warm = list(documents[: min(WARMUP, len(documents) // 4)])
    measured = list(documents[len(warm) : len(warm) + DOCUMENTS])
    with StubTei(dimension) as stub:
        say(f"  instant: the workers restarted against a stub TEI server at {stub.url}")
        restart(embedder_env(stub.url, dimension))
        try:
            if warm:
                ingest.load(client, warm, say, timeout_s)
            stub.texts = 0
            before = cpu_by_role(data_dir)
            wall, failed = ingest.load(client, measured, say, timeout_s)
            cpu = cpu_spent(before, cpu_by_role(data_dir))
        finally:
            restart({})
    stored = client.chunk_count([document_key(d.user_id, d.document_id) for d in measured])
    stack_cpu = sum(cpu.values())
    say(f"  instant: {stored} chunks stored in {wall:.1f} s ({stored / wall:.1f}/s)")
    return {
        "documents": len(measured),
        "failed_documents": failed,
        "chunks": stored,
        "seconds": round(wall, 3),
        "chunks_per_s": stored / wall,
        "embedder_texts": stub.texts,
        "cpu_s": cpu,
        "stack_cpu_ms_per_chunk": round(1000 * stack_cpu / stored, 2) if stored else None,
        "cpu_share_of_wall": {role: round(s / wall, 3) for role, s in cpu.items()},
    }
