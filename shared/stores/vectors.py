"""Which vector store a process uses: a Qdrant server when ``ENGRAM_QDRANT_URL`` is set, else
the embedded engine ``ENGRAM_QDRANT_ENGINE`` names (``local``: qdrant-client's local mode;
``edge``: Qdrant Edge, which first copies a local-mode folder it finds, see
``qdrant_edge_migration.py``).

Both adapters are imported with this module (so with the container, at a worker's start), not at
a process's first search: qdrant-client's import takes seconds on a loaded machine, and a search
that paid for it could run out of its timeout."""

from __future__ import annotations

from shared.settings import Settings
from shared.stores.base import VectorConnection
from shared.stores.qdrant import QdrantConnection
from shared.stores.qdrant_edge import EdgeConnection


def connect_vectors(settings: Settings) -> VectorConnection:
    """The connection; nothing is opened before its first use."""
    if settings.qdrant_url is None and settings.qdrant_engine == "edge":
        return EdgeConnection(settings, migrate_from=settings.qdrant_local_path)
    return QdrantConnection(settings)
