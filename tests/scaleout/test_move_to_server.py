"""The operator's path of issue 27: a stack whose backup is embedded (Qdrant Edge) moves to a new
Qdrant server, and the server then backs it up and restores it both ways.

As docs/operations/past-one-machine.md says it: the write worker (the one process that touches the
backup) is restarted with ``ENGRAM_QDRANT_URL`` and ``ENGRAM_QDRANT_API_KEY`` naming the server,
and ``engram restore --to qdrant`` rebuilds the backup there from Neo4j. Then ``engram backup
--qdrant`` downloads the server's snapshot into the backup folder, and ``engram restore`` brings a
tenant lost from Neo4j back from the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import neo4j
import pytest
from fastapi.testclient import TestClient

from producers.cli import main as cli_main
from shared.settings import Settings, get_settings
from shared.stores.qdrant import QdrantConnection
from shared.stores.vectors import connect_vectors
from tests.integration.documents import FACTS, long_text, post_documents
from tests.integration.support import DIMENSION, MODEL, Workers, cypher, tenant_points, wait_until_finished
from tests.scaleout.qdrant_server import QdrantServer

pytestmark = pytest.mark.integration

MEMORIES = "MATCH (m:Memory) WHERE m.user_id = $u RETURN m.id AS id, m.version AS version ORDER BY id"


@pytest.fixture
def new_server(
    qdrant_server: QdrantServer, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Settings]:
    """The write worker and this process's CLI pointed at the server (a prefix of their own: a
    new, empty backup); the write worker back on the session's backup afterwards."""
    server = qdrant_server.settings()
    env = {
        "ENGRAM_QDRANT_URL": str(server.qdrant_url),
        "ENGRAM_QDRANT_API_KEY": server.qdrant_api_key.get_secret_value() if server.qdrant_api_key else "",
        "ENGRAM_QDRANT_COLLECTION_PREFIX": server.qdrant_collection_prefix,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()  # the CLI's settings, read once a process
    workers.restart("write", **env)
    try:
        yield server
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
        workers.restart("write")
        connection = connect_vectors(server)
        connection.drop(MODEL, DIMENSION)
        connection.close()


def test_an_embedded_backup_moves_to_a_new_server_which_backs_up_and_restores_both_ways(
    api: TestClient,
    neo4j_driver: neo4j.Driver,
    workers: Workers,
    tenant: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    # Given a tenant's documents stored with the session's backup (embedded unless the whole run
    # is on a server)
    documents = [{"user_id": tenant, "id": key, "text": text} for key, text in FACTS.items()]
    documents.append({"user_id": tenant, "id": "long", "text": long_text(60)})
    wait_until_finished(api, tenant, post_documents(api, documents))
    before = cypher(neo4j_driver, MEMORIES, u=tenant)

    # When the write worker is moved to a new server and the backup rebuilt there from Neo4j
    server: Settings = request.getfixturevalue("new_server")
    assert cli_main(["restore", "--to", "qdrant"]) == 0

    # Then the server holds every Memory of the tenant at its version
    connection = connect_vectors(server)
    try:
        points = tenant_points(connection.store(MODEL, DIMENSION), tenant)
        assert {i: p.version for i, p in points.items()} == {r["id"]: r["version"] for r in before}
        assert len(before) > len(FACTS)
    finally:
        connection.close()

    # When the server's backup is taken
    folder = tmp_path / "backup"
    assert cli_main(["backup", str(folder), "--qdrant", "--tenant", tenant]) == 0

    # Then the folder holds the server's snapshot beside Neo4j's export, and the server keeps none
    (snapshot,) = folder.glob("*.snapshot")
    assert snapshot.stat().st_size > 0 and list(folder.glob("neo4j-*.jsonl"))
    served = connect_vectors(server)
    try:
        assert isinstance(served, QdrantConnection) and not served.embedded
        assert served.client().list_snapshots(served.store(MODEL, DIMENSION).collection) == []
    finally:
        served.close()

    # When the tenant is lost from Neo4j and restored from the server
    cypher(
        neo4j_driver, "MATCH (n) WHERE (n:Memory OR n:Document) AND n.user_id = $u DETACH DELETE n", u=tenant
    )
    assert cli_main(["restore", "--tenant", tenant, "--fresh"]) == 0

    # Then its Memories are back at their versions
    assert cypher(neo4j_driver, MEMORIES, u=tenant) == before
