"""``ops/n8n-check`` counts the documents' points in the backup of whichever engine is configured
(issue 29: it opened local mode's folder and found 0 points once Edge was the default): written
through the configured engine by one process, then counted by the check's helper in another
open, as the check does after the stack stops."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from shared.stores.base import VectorPoint
from shared.stores.vectors import connect_vectors
from tests.unit.vector_engines import ENGINES, Engine, engine_settings

MODEL, DIM = "test-model", 4


def n8n_check() -> ModuleType:
    """ops/n8n_check.py, a script beside the shell half of the check (ops/ is no package)."""
    path = Path(__file__).resolve().parents[2] / "ops" / "n8n_check.py"
    spec = importlib.util.spec_from_file_location("n8n_check", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def point(n: int, tenant: str, document_id: str) -> VectorPoint:
    payload = {
        "id": str(uuid.UUID(int=n)),
        "user_id": tenant,
        "document_id": document_id,
        "embedding_model": MODEL,
        "embedding_dim": DIM,
    }
    return VectorPoint(str(uuid.UUID(int=n)), [1.0, float(n), 0.5, 0.25], 1, payload)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_check_counts_each_documents_points_in_the_configured_engine(
    engine: Engine, tmp_path: Path
) -> None:
    # Given 300 points of two documents of one tenant (more than a page) and one of another tenant,
    # written through the configured engine, then closed (the stack stopped)
    settings = engine_settings(engine, tmp_path)
    writer = connect_vectors(settings)
    points = [point(n, "n8n", "a" if n % 3 else "b") for n in range(1, 301)]
    writer.store(MODEL, DIM).upsert([*points, point(301, "other", "a")])
    writer.close()

    # When the check counts the tenant's points through the same settings
    reader = connect_vectors(settings)
    try:
        counts = n8n_check().backup_counts(reader, "n8n", page=64)
    finally:
        reader.close()

    # Then each document has its own points, the other tenant's left out
    assert counts == {"a": 200, "b": 100}
