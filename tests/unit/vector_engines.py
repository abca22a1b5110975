"""The embedded vector engines, opened on a tmp folder: one adapter test suite runs on each.

``local`` is qdrant-client's local mode (``shared/stores/qdrant.py``), ``edge`` Qdrant Edge
(``shared/stores/qdrant_edge.py``). Both are the real engines, not fakes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from shared.settings import Settings
from shared.stores.qdrant import QdrantConnection
from shared.stores.qdrant_edge import EdgeConnection

Engine = Literal["local", "edge"]
ENGINES: tuple[Engine, ...] = ("local", "edge")


def engine_settings(engine: Engine, folder: Path) -> Settings:
    return Settings(
        _env_file=None,
        qdrant_url=None,
        qdrant_engine=engine,
        qdrant_path=folder / "qdrant",
        qdrant_edge_path=folder / "qdrant-edge",
    )


def connect(engine: Engine, folder: Path) -> Any:
    """An embedded connection of this engine (``QdrantConnection`` or ``EdgeConnection``)."""
    settings = engine_settings(engine, folder)
    return EdgeConnection(settings) if engine == "edge" else QdrantConnection(settings)
