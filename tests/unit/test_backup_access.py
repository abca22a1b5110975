"""Every tool and test reads the backup through the configured engine's adapter (``connect_vectors``
or the container), never by opening a Qdrant folder or client itself: ``ops/n8n-check`` counted
points with ``QdrantClient(path=...)``, local mode's folder, long after Qdrant Edge became the
default, and found none (issue 29). This scan of the repository's Python files fails on the next
module that does so outside ``shared/stores/``.

What it refuses outside ``shared/stores/``:
- a call of qdrant-client's clients (``QdrantClient(``, ``AsyncQdrantClient(``);
- any import of ``qdrant_edge`` (Edge's classes open its folder);
- a read of an engine's folder setting (``qdrant_local_path``, ``qdrant_edge_local_path``): the
  folder of the configured engine is ``shared.stores.vectors.embedded_folder``;
- an adapter picked by name (``QdrantConnection(``, ``EdgeConnection(``), but in the tests of
  those engines themselves (``ENGINE_TESTS``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORES = ROOT / "shared" / "stores"
CLIENTS = {"QdrantClient", "AsyncQdrantClient"}
FOLDERS = {"qdrant_local_path", "qdrant_edge_local_path"}
ADAPTERS = {"QdrantConnection", "EdgeConnection"}
# Where a folder setting is defined, and the test of its default.
FOLDER_HOMES = {ROOT / "shared" / "settings" / "stores.py", ROOT / "tests" / "unit" / "test_settings.py"}
# Tests of one engine by name: each builds that engine's adapter on a folder of its own.
ENGINE_TESTS = {
    ROOT / "tests" / "unit" / "vector_engines.py",
    ROOT / "tests" / "unit" / "test_edge_migration.py",
    ROOT / "tests" / "faults" / "test_edge_storage.py",
}


def python_files() -> list[Path]:
    """The repository's own modules: not its venv, caches or data folders (dot folders)."""
    return [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
    ]


def _called(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def violations(source: str, path: Path) -> list[str]:
    """Each place in ``source`` that reaches the backup past the adapters, as ``line: what``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call) and _called(node) in CLIENTS:
            found.append((line, f"constructs {_called(node)}"))
        elif isinstance(node, ast.Call) and _called(node) in ADAPTERS and path not in ENGINE_TESTS:
            found.append((line, f"picks the adapter {_called(node)} (use connect_vectors)"))
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "qdrant_edge" for a in node.names):
            found.append((line, "imports qdrant_edge"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "qdrant_edge":
            found.append((line, "imports from qdrant_edge"))
        elif isinstance(node, ast.Attribute) and node.attr in FOLDERS and path not in FOLDER_HOMES:
            found.append((line, f"reads {node.attr} (use embedded_folder)"))
    return [f"{line}: {what}" for line, what in sorted(found)]


def test_no_module_outside_the_stores_opens_the_backup_itself() -> None:
    # Given every Python module of the repository outside shared/stores/
    modules = [path for path in python_files() if not path.is_relative_to(STORES)]
    assert ROOT / "ops" / "n8n_check.py" in modules and ROOT / "tests" / "faults" / "stack.py" in modules
    # When each is scanned, Then none constructs a client, imports Edge or opens an engine's folder
    found = {
        str(path.relative_to(ROOT)): hits
        for path in modules
        if (hits := violations(path.read_text(encoding="utf-8"), path))
    }
    assert found == {}


def test_the_scan_finds_each_way_past_the_adapters() -> None:
    # Given a module that does each thing the scan refuses
    source = "\n".join(
        [
            "from qdrant_client import QdrantClient",
            "import qdrant_edge as qe",
            "from qdrant_edge import EdgeShard",
            "client = QdrantClient(path=str(settings.qdrant_local_path))",
            "aclient = qdrant_client.AsyncQdrantClient(url=url)",
            "shard = qe.EdgeShard(str(settings.qdrant_edge_local_path))",
            "connection = EdgeConnection(settings)",
        ]
    )
    # When it is scanned as a tool's module, Then each is named with its line
    assert violations(source, ROOT / "ops" / "tool.py") == [
        "2: imports qdrant_edge",
        "3: imports from qdrant_edge",
        "4: constructs QdrantClient",
        "4: reads qdrant_local_path (use embedded_folder)",
        "5: constructs AsyncQdrantClient",
        "6: reads qdrant_edge_local_path (use embedded_folder)",
        "7: picks the adapter EdgeConnection (use connect_vectors)",
    ]
    # and an engine's own tests may build its adapter
    assert violations("c = EdgeConnection(s)", ROOT / "tests" / "unit" / "test_edge_migration.py") == []
