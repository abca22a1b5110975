"""Neo4j, the primary store and the source of truth, one module per concern.

``Neo4jStore`` is one object over one driver (``connection.py``), made of the methods of each
concern, each module beside its Cypher (``*_queries.py``):

- ``schema.py``: constraints and indexes, the claim nodes, the model the store holds;
- ``writes.py``: documents and chunks written and deleted, the graph derived again;
- ``lifecycle.py``: the memory API's reads and deletes, and a tenant's counts;
- ``sync.py``: the Qdrant sync's rows and marks, the reconciler's reads;
- ``restore.py``: the store's identity, a restore's checkpoint, backup's pages;
- ``reembed.py``: a model migration;
- ``search.py``: what a search reads;
- ``graph.py``: the sessions and entities derived inside every write;
- ``filters.py``: the search filters as Cypher.

It satisfies the Protocols of ``shared/stores/base.py`` (``GraphStore``, ``MigrationStore``) as one
class did. The API keys, the entity browser and the incremental ingest's reads are adapters of
their own over its connection (``shared/stores/neo4j_keys.py``, ``neo4j_entities.py``,
``neo4j_incremental.py``).
"""

from __future__ import annotations

from shared.stores.neo4j.connection import Neo4jConnection
from shared.stores.neo4j.filters import filter_parameters
from shared.stores.neo4j.lifecycle import LifecycleOps
from shared.stores.neo4j.reembed import ReembedOps
from shared.stores.neo4j.restore import RestoreOps
from shared.stores.neo4j.schema import SchemaOps, schema_names
from shared.stores.neo4j.search import SearchOps
from shared.stores.neo4j.sync import SyncOps, restore_fields
from shared.stores.neo4j.writes import WriteOps, memory_of


class Neo4jStore(
    WriteOps, LifecycleOps, SyncOps, RestoreOps, ReembedOps, SearchOps, SchemaOps, Neo4jConnection
):
    """The primary store: every concern's methods over one driver."""


__all__ = ["Neo4jStore", "filter_parameters", "memory_of", "restore_fields", "schema_names"]
