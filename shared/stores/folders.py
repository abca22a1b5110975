"""Where the configured embedded engine keeps its collections, without loading either engine (the
HTTP app's health probe names the folder; importing qdrant-client for that would take seconds).

For messages and for tools that act on the folder whole (a backup's copy, a fault drill's
freeze), never to open it: the backup is read through ``connect_vectors`` (``vectors.py``)."""

from __future__ import annotations

from pathlib import Path

from shared.settings import Settings


def embedded_folder(settings: Settings) -> Path:
    """The folder of ``ENGRAM_QDRANT_ENGINE`` (Edge's or local mode's), used when no server is
    set (``ENGRAM_QDRANT_URL``)."""
    return settings.qdrant_edge_local_path if settings.qdrant_engine == "edge" else settings.qdrant_local_path
